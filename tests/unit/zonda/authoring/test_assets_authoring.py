"""Airflow 2 Datasets and Airflow 3 Assets render into the manifest (schedule, outlets, inlets)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from zonda.authoring.compat import airflow_imports


def render(tmp_path: Path, source: str) -> dict[str, dict]:
    from zonda.authoring.dag_files import load_file
    from zonda.authoring.manifests import dag_manifest

    path = tmp_path / "assets_dag.py"
    path.write_text(textwrap.dedent(source))
    with airflow_imports(enabled=True):
        results = load_file(path, tmp_path)
        return {
            dag.dag_id: dag_manifest(dag, dags_folder=tmp_path)["spec"] for r in results for dag in r.dags
        }


def test_airflow_2_datasets_render_schedule_outlets_and_run_type(tmp_path: Path) -> None:
    specs = render(
        tmp_path,
        """
        import pendulum
        from airflow.datasets import Dataset, DatasetAlias
        from airflow.models.dag import DAG
        from airflow.operators.bash import BashOperator
        from airflow.timetables.datasets import DatasetOrTimeSchedule
        from airflow.timetables.trigger import CronTriggerTimetable

        d1, d2 = Dataset("s3://dag1/output_1.txt"), Dataset("s3://dag2/output_1.txt")
        start = pendulum.datetime(2021, 1, 1, tz="UTC")
        with DAG(dag_id="producer", start_date=start, schedule="@daily"):
            BashOperator(task_id="p", bash_command="true", outlets=[d1, DatasetAlias("al")])
        with DAG(dag_id="consumer", start_date=start, schedule=(d1 & d2) | Dataset("x")):
            BashOperator(task_id="c", bash_command="true", inlets=[d1])
        with DAG(dag_id="either", start_date=start, schedule=DatasetOrTimeSchedule(
                timetable=CronTriggerTimetable("0 1 * * 3", timezone="UTC"), datasets=[d1, d2])):
            BashOperator(task_id="c", bash_command="true")
        """,
    )
    assert specs["producer"]["tasks"][0]["outlets"] == [{"uri": "s3://dag1/output_1.txt"}, {"alias": "al"}]
    assert specs["consumer"]["assetSchedule"] == {
        "any": [{"all": [{"uri": "s3://dag1/output_1.txt"}, {"uri": "s3://dag2/output_1.txt"}]}, {"uri": "x"}]
    }
    assert specs["consumer"]["assetRunType"] == "dataset_triggered"
    assert "schedule" not in specs["consumer"] or specs["consumer"]["schedule"] is None
    assert specs["consumer"]["tasks"][0]["inlets"] == [{"uri": "s3://dag1/output_1.txt"}]
    assert specs["either"]["assetSchedule"]["all"][1] == {"uri": "s3://dag2/output_1.txt"}
    assert specs["either"]["timetable"]["class"].endswith("CronTriggerTimetable")


def test_airflow_3_assets_and_the_asset_decorator(tmp_path: Path) -> None:
    specs = render(
        tmp_path,
        """
        from airflow.sdk import Asset, asset
        from airflow.models.dag import DAG
        from airflow.operators.empty import EmptyOperator

        @asset(schedule=None)
        def raw_orders():
            return 1

        with DAG(dag_id="uses", schedule=[raw_orders, Asset(uri="s3://b/k", name="k", group="g")]):
            EmptyOperator(task_id="t")
        """,
    )
    assert specs["raw_orders"]["tasks"][0]["outlets"] == [{"uri": "raw_orders"}]
    assert specs["uses"]["assetSchedule"] == {
        "all": [{"uri": "raw_orders"}, {"uri": "s3://b/k", "name": "k", "group": "g"}]
    }
    assert specs["uses"]["assetRunType"] == "asset_triggered"


def test_a_bad_uri_fails_the_file_where_it_is_written() -> None:
    from zonda.authoring.assets import Dataset

    with pytest.raises(ValueError, match="reserved"):
        Dataset("airflow://nope")


def test_a_start_date_of_year_one_is_written_with_four_digits() -> None:
    import datetime as dt

    from zonda.authoring.manifest_values import utc_iso

    assert utc_iso(dt.datetime.min) == "0001-01-01T00:00:00Z"  # strftime("%Y") writes "1"
    assert utc_iso(dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC)) == "2024-01-02T03:04:05.000006Z"


MULTI = """
from airflow.sdk import Asset, asset, dag, task

orders = Asset(uri="s3://bucket/orders", name="orders")
customers = Asset(uri="s3://bucket/customers", name="customers")


@asset.multi(outlets=[orders, customers], schedule=None)
def load_both():
    pass


@asset.multi(outlets=[orders], schedule="@daily", dag_id="named_multi")
def load_named():
    pass


@dag(schedule=load_both)
def after_both():
    @task
    def report():
        pass

    report()


after_both()
"""


def test_asset_multi_is_one_task_updating_every_outlet_and_an_all_of_them_in_a_schedule(
    tmp_path: Path,
) -> None:
    """What Airflow 3.3.2's DagBag loaded from MULTI: `load_both` (NullTimetable) with task `load_both`
    outlets [orders, customers]; `named_multi` (CronTriggerTimetable) with task `load_named`; `after_both`
    on an AssetTriggeredTimetable whose condition is the MultiAssetDefinition (an AssetAll) of both."""
    specs = render(tmp_path, MULTI)
    assert sorted(specs) == ["after_both", "load_both", "named_multi"]
    orders = {"uri": "s3://bucket/orders", "name": "orders"}
    customers = {"uri": "s3://bucket/customers", "name": "customers"}
    [both] = specs["load_both"]["tasks"]
    assert both["id"] == "load_both" and both["outlets"] == [orders, customers]
    assert specs["load_both"].get("schedule") is None and specs["load_both"].get("assetSchedule") is None
    [named] = specs["named_multi"]["tasks"]
    assert named["id"] == "load_named" and named["outlets"] == [orders]
    assert specs["after_both"]["assetSchedule"] == {"all": [orders, customers]}


def test_asset_multi_refuses_what_airflow_refuses() -> None:
    from zonda.authoring.assets import asset

    with pytest.raises(ValueError, match="no outlets provided"):
        asset.multi(outlets=[])(lambda: None)

    def outer() -> None:
        def inner() -> None:
            pass

        asset(schedule=None)(inner)

    with pytest.raises(ValueError, match="nested function not supported"):
        outer()


def test_an_asset_functions_parameters_are_given_as_airflow_3s_asset_operator_gives_them(
    tmp_path: Path,
) -> None:
    """Airflow 3.3.2's DagBag loaded example_asset_decorator's `asset2_producer(self, context,
    asset1_producer)` with inlets [AssetNameRef('asset1_producer')]; its `_AssetMainOperator` calls it
    with `self` the asset, `context` the context and `asset1_producer` the asset of that name."""
    specs = render(
        tmp_path,
        """
        from airflow.sdk import asset

        @asset(uri="s3://bucket/asset1_producer", schedule=None)
        def asset1_producer():
            pass

        @asset(uri="s3://bucket/object", schedule=None)
        def asset2_producer(self, context, asset1_producer, keep="default"):
            return self, context["marker"], asset1_producer, keep
        """,
    )
    [task] = specs["asset2_producer"]["tasks"]
    assert task["inlets"] == [{"uri": "s3://bucket/asset1_producer", "name": "asset1_producer"}]
    assert task["outlets"] == [{"uri": "s3://bucket/object", "name": "asset2_producer"}]
    from zonda.authoring.assets import Asset, asset_callable

    def asset2_producer(self: Any, context: Any, asset1_producer: Any, keep: str = "default") -> Any:
        return self, context["marker"], asset1_producer, keep

    me, marker, upstream, keep = asset_callable(asset2_producer, "asset2_producer")(marker=7, ds="x")
    assert (me.uri, marker, upstream.uri, keep) == (
        "s3://bucket/object",
        7,
        "s3://bucket/asset1_producer",
        "default",
    )
    assert isinstance(me, Asset)
    with pytest.raises(TypeError, match=r"wildcard '\*\*kw' is not supported in @asset"):
        from zonda.authoring.assets import asset

        asset(schedule=None)(star)


def star(**kw: Any) -> None:
    """Module level: a nested function is refused before its parameters are looked at (as Airflow)."""


def test_asset_access_control_is_accepted_kept_and_named_in_the_report(tmp_path: Path) -> None:
    """Airflow 3.3's `AssetAccessControl` (task-sdk `definitions/asset/access_control.py`): teams are
    non-empty strings, `allow_global` a bool. With multi-team off (Airflow's default) it changes
    nothing: the file renders as without it, and the report says it is not enforced."""
    from zonda.authoring import rendering

    source = textwrap.dedent(
        """
        import pendulum
        from airflow.providers.standard.operators.bash import BashOperator
        from airflow.sdk import DAG, Asset, AssetAccessControl

        shared = Asset(name="shared", uri="s3://lake/shared.csv",
                       access_control=AssetAccessControl(producer_teams=["analytics"], allow_global=False))
        start = pendulum.datetime(2024, 1, 1, tz="UTC")
        with DAG(dag_id="producer", start_date=start, schedule="@daily"):
            BashOperator(task_id="produce", outlets=[shared], bash_command="true")
        with DAG(dag_id="consumer", start_date=start, schedule=[shared]):
            BashOperator(task_id="consume", bash_command="true")
        with DAG(dag_id="unrelated", start_date=start, schedule="@daily"):
            BashOperator(task_id="t", bash_command="true")
        """
    )
    path = tmp_path / "teams.py"
    path.write_text(source)
    report = rendering.render_paths([path], airflow_compat=True)
    assert not report.file_errors
    by_id = {d.dag_id: d for d in report.dags}
    assert by_id["consumer"].manifest["spec"]["assetSchedule"] == {
        "uri": "s3://lake/shared.csv",
        "name": "shared",
    }
    assert by_id["producer"].manifest["spec"]["tasks"][0]["outlets"] == [
        {"uri": "s3://lake/shared.csv", "name": "shared"}
    ]
    for dag_id in ("producer", "consumer"):
        assert "not enforced" in by_id[dag_id].unsupported["access_control"], dag_id
    assert "access_control" not in by_id["unrelated"].unsupported  # the negative beside the positives


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"producer_teams": [""]}, ValueError),
        ({"consumer_teams": ["ok", " "]}, ValueError),
        ({"allow_global": "yes"}, TypeError),
    ],
)
def test_asset_access_control_refuses_what_airflow_refuses(kwargs: dict[str, Any], error: type) -> None:
    from zonda.authoring.assets import AssetAccessControl

    with pytest.raises(error):
        AssetAccessControl(**kwargs)


def test_chained_and_and_or_flatten_as_airflows_conditions() -> None:
    """Airflow's `AssetAll.__and__`/`AssetAny.__or__` (and 2.10's Dataset ones) append to the left
    condition: `a & b & c` is one all-of of three; a right-hand group stays a group."""
    from zonda.authoring.assets import Asset, Dataset, DatasetAll

    a, b, c = Asset("s3://x/a"), Asset("s3://x/b"), Asset("s3://x/c")
    assert (a & b & c).to_manifest() == {
        "all": [{"uri": "s3://x/a"}, {"uri": "s3://x/b"}, {"uri": "s3://x/c"}]
    }
    assert (a | b | c).to_manifest() == {
        "any": [{"uri": "s3://x/a"}, {"uri": "s3://x/b"}, {"uri": "s3://x/c"}]
    }
    assert (a & (b & c)).to_manifest() == {
        "all": [{"uri": "s3://x/a"}, {"all": [{"uri": "s3://x/b"}, {"uri": "s3://x/c"}]}]
    }
    d = Dataset("s3://x/d")
    assert isinstance(d & d & d, DatasetAll), "the Airflow 2 dialect is kept"
