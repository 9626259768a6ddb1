"""A user's moves on runs: clear and mark (`clear_and_mark`), and a clear that follows
`ExternalTaskMarker`s into other DAGs' runs (`across_dags`), each move through the transition table.

May import: every core package below it (`zonda.passes` and down); never the Airflow API packages.
"""
