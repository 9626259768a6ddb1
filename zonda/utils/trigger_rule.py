"""`from zonda.utils.trigger_rule import TriggerRule`, as Airflow's `airflow.utils.trigger_rule`."""

from zonda.resources.models import TriggerRule

__all__ = ["TriggerRule"]
