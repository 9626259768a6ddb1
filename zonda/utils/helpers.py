"""`chain`, `chain_linear` and `cross_downstream`, also importable from here as in Airflow's
`airflow.utils.helpers`."""

from zonda.authoring.relations import chain, chain_linear, cross_downstream

__all__ = ["chain", "chain_linear", "cross_downstream"]
