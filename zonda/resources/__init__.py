"""The resources' shapes and the facts on the wire: what Zonda stores in the apiserver and hands a try.

The pydantic models of every custom resource (`models`: the shared base and `DAG`; `dagrun_models`,
`trigger_models`, `backfill_models`, `pool_models`, `xcom_chunks`) and their CRDs (`crds`); the labels,
annotations and timestamps on the wire (`wire`), deterministic names (`names`), conditions, run types,
durations as resources spell them, JSON that keeps datetimes; the task-instance state machine every
status follows (`states`); the runner's protocol (`invocations`, `xcom_refs`); the Events a pass or a
DAG's plan asks for (`run_events`).

May import: pydantic, msgspec, the standard library, and nothing else of `zonda` (the bottom layer).
"""
