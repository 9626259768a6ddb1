"""Reconcilers: gather what a DAG or DagRun needs, call the pure core in `zonda`, act on its plan."""
