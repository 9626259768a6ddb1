"""`zonda.schedules.manual_runs`: the run `zonda dags trigger` and the UI create, in each dialect.

Expected values: Airflow 3.1.8's `airflow dags trigger` and REST API trigger, Airflow 2.10's `dags
trigger`, as cited per test.
"""

from __future__ import annotations

from datetime import UTC, datetime

from zonda.schedules import manual_runs

TRIGGERED = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def test_a_trigger_of_an_airflow3_dag_names_the_run_by_its_request_time_and_gives_no_logical_date() -> None:
    """Airflow 3.1.8 `airflow dags trigger` (`cli/commands/dag_command.py` `dag_trigger` ->
    `trigger_dag`) and the REST API without a logical date: none, due at the request's time. The name
    is computed once from that time, so creating the same request again is an AlreadyExists."""
    run = manual_runs.manual_run(
        "etl", {"airflowVersion": "3"}, "ns", logical_date=None, conf={}, now=TRIGGERED
    )
    assert run.name == "etl-manual-20260304t050607123456z"
    assert run.body["spec"] == {
        "dagName": "etl",
        "runType": "manual",
        "runAfter": "2026-03-04T05:06:07.123456Z",
        "conf": {},
    }
    assert run.describe() == "due 2026-03-04T05:06:07.123456+00:00 (no logical date)"
    again = manual_runs.manual_run(
        "etl", {"airflowVersion": "3"}, "ns", logical_date=None, conf={}, now=TRIGGERED
    )
    assert again.body == run.body


def test_a_trigger_with_a_logical_date_or_of_an_airflow2_dag_is_at_that_date() -> None:
    given = datetime(2026, 1, 1, tzinfo=UTC)
    af3 = manual_runs.manual_run(
        "etl", {"airflowVersion": "3"}, "ns", logical_date=given, conf={}, now=TRIGGERED
    )
    assert af3.name == "etl-manual-20260101t000000z"
    assert (af3.body["spec"]["logicalDate"], af3.body["spec"]["runAfter"]) == (
        "2026-01-01T00:00:00Z",
        "2026-03-04T05:06:07.123456Z",
    )
    af2 = manual_runs.manual_run("etl", {}, "ns", logical_date=None, conf={}, now=TRIGGERED)
    assert af2.name == "etl-manual-20260304t050607123456z"
    assert af2.body["spec"]["logicalDate"] == "2026-03-04T05:06:07.123456Z"
    assert "runAfter" not in af2.body["spec"]


def test_a_trigger_for_a_partition_carries_its_key() -> None:
    """Airflow 3.2+'s REST trigger body `partition_key` (`TriggerDAGRunPostBody`): the run is for it."""
    run = manual_runs.manual_run(
        "ingest", {"airflowVersion": "3"}, "ns", logical_date=None, conf={}, now=TRIGGERED, partition_key="eu"
    )
    assert run.body["spec"]["partitionKey"] == "eu"
    at_runtime = {"partitionedAtRuntime": True}
    assert manual_runs.partition_key_problem("ingest", at_runtime, "eu") is None
    cron = {"timetable": {"class": "zonda.timetables.trigger.CronPartitionTimetable",
                          "params": {"expression": "0 * * * *", "timezone": "UTC"}}}  # fmt: skip
    assert manual_runs.partition_key_problem("hourly", cron, "2026-06-14T03:00:00") is None
    assert manual_runs.partition_key_problem("etl", {"schedule": "@daily"}, "eu") == (
        "Dag 'etl' is not a partitioned Dag and does not accept a partition_key."  # Airflow's words
    )
    assert "not blank" in str(manual_runs.partition_key_problem("ingest", at_runtime, " "))
