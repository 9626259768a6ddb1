"""A DAG spec resolved into the graph the scheduler works on, and checked as Airflow checks a DAG file.

`dags.resolve_dag` (its task graph in `graph`, its DAG-level checks in `checks`, its messages in
`errors`), DAG params' schema (`params`), operator arguments (`operator_arguments`), which class runs
a task (`operator_registry`, `imports`), mapped tasks and mapped task groups as the spec declares them
(`mapping`, `mapped_groups`), and the merge rule for a task's container and pod override (`merging`).

May import: `zonda.resources`, `zonda.timetables`.
"""
