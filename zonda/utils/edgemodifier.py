"""`from zonda.utils.edgemodifier import Label`, as Airflow's `airflow.utils.edgemodifier`."""

from zonda.authoring.relations import Label

EdgeModifier = Label

__all__ = ["EdgeModifier", "Label"]
