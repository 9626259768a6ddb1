"""One scheduler pass over one DagRun: what it observed in, everything the controller must do out.

`compose` (`compose_pass`: what a pass gathered in, its `PassPlan` out; the one composition the
controller, `DAG.test()` and the callback launches call) over `decisions` (the pass's types: what was
observed, the `RunPlan`), `limits` (`PassLimits`: one frozen value, one default each), `run_pass`
(`decide`: the pass, step by step) with its steps acting on `pass_state` (`PassState`): `readiness`
(which task instances may run: `trigger_rules`, `skips`), `attempts` (what the executor and triggerer
saw; `retries`), `mapped_instances` (expansions; `status_budget`), `graphs`; admission to pools and
concurrency limits (`pools`, `run_slots`); a mapped KubernetesPodOperator's arguments
(`container_mapping`); `plans` (a run's start, its strays, the LatestOnly window); `callbacks`
(callback tries and SLA misses a pass leaves due); `produced_assets` (the asset events of the
successes a pass saw); `events` (which of its Events are posted);
`history` (which finished runs and pods to delete).

May import: `zonda.schedules`, `zonda.tries`, `zonda.specs`, `zonda.timetables`, `zonda.resources`.
"""
