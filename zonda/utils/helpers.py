"""`chain` and `cross_downstream`, also importable from here as in Airflow's `airflow.utils.helpers`."""

from zonda.authoring.relations import chain, cross_downstream

__all__ = ["chain", "cross_downstream"]
