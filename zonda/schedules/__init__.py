"""A DAG's runs over time: which run is due next, what a DAG's status says, backfills, upcoming runs,
and the runs one DAG makes or waits for in another.

`scheduling` (the next due run, catch-up, run names), `dag_plans` (the DAG reconciler's one decision:
`plan_dag`), `backfills`, `upcoming` (`dags next-execution`), `dag_dependencies` (TriggerDagRun and
ExternalTaskSensor's pure half).

May import: `zonda.tries`, `zonda.specs`, `zonda.timetables`, `zonda.resources`.
"""
