"""Deferrable Operators & Triggers: the page's WaitOneHourSensor (Zonda ships it in examples/)."""

from airflow import DAG

from examples.operators.wait_one_hour import WaitOneHourSensor

with DAG("wait_one_hour", schedule_interval=None):
    WaitOneHourSensor(task_id="wait_one_hour")
