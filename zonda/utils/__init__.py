"""Airflow's `airflow.utils` modules DAG files import: task_group, edgemodifier, trigger_rule, helpers."""
