"""Which variables and connections a task's pod gets: references the kubelet resolves, never values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zonda.authoring import rendering
from zonda.resources.models import DagSpec
from zonda.specs import dags
from zonda.specs.dags import ResolvedTask
from zonda.tries.secret_refs import LabelledSecret, PodReferences, Sources, apply_references, plan_references

SOURCES = Sources(
    variable_config_maps=["team-vars", "shared-vars"],
    variable_secrets=[LabelledSecret("vault-vars", frozenset({"api_token", "unused"}))],
    connection_secrets=[
        LabelledSecret("conns-b", frozenset({"warehouse", "crm"})),
        LabelledSecret("conns-a", frozenset({"warehouse"})),
        LabelledSecret("conns-other", frozenset({"not_named"})),
    ],
)


def task(args: dict[str, Any] | None = None, **fields: Any) -> ResolvedTask:
    empty: frozenset[str] = frozenset()
    return ResolvedTask(
        task_id="load", operator="BashOperator", args=args or {}, upstream=empty, downstream=empty, **fields
    )


def secret_env(references: PodReferences) -> dict[str, tuple[str, str]]:
    return {
        entry["name"]: (entry["valueFrom"]["secretKeyRef"]["name"], entry["valueFrom"]["secretKeyRef"]["key"])
        for entry in references.env
    }


def test_every_task_gets_every_variable_configmap_with_airflows_prefix() -> None:
    references = plan_references(task(), SOURCES)
    assert references.env_from == [
        {"prefix": "AIRFLOW_VAR_", "configMapRef": {"name": "team-vars", "optional": True}},
        {"prefix": "AIRFLOW_VAR_", "configMapRef": {"name": "shared-vars", "optional": True}},
    ]  # the later entry wins in Kubernetes: the first ConfigMap by name wins, as for Secrets


def test_a_task_naming_nothing_gets_no_secret() -> None:
    assert plan_references(task({"bash_command": "echo {{ ds }}"}), SOURCES).env == []


def test_connections_named_in_the_spec_by_argument_and_in_templates_are_referenced() -> None:
    named = task(
        {"postgres_conn_id": "warehouse", "bash_command": "curl {{ conn.crm.host }} {{ conn.get('ghost') }}"},
    )
    assert secret_env(plan_references(named, SOURCES)) == {
        "AIRFLOW_CONN_CRM": ("conns-b", "crm"),
        "AIRFLOW_CONN_WAREHOUSE": ("conns-a", "warehouse"),  # held twice: the first Secret by name
    }


def test_a_templated_conn_id_argument_is_not_taken_as_a_name() -> None:
    assert plan_references(task({"conn_id": "{{ params.conn }}"}), SOURCES).env == []


def test_secret_variables_are_referenced_only_when_named() -> None:
    by_spec = task(variables=("api_token",))
    by_template = task({"env": {"TOKEN": "{{ var.value.api_token }}"}})
    for named in (by_spec, by_template):
        assert secret_env(plan_references(named, SOURCES)) == {
            "AIRFLOW_VAR_API_TOKEN": ("vault-vars", "api_token")
        }


def test_a_name_no_secret_holds_gets_no_reference_so_the_task_says_where_to_add_it() -> None:
    assert plan_references(task(connections=("nowhere",), variables=("nothing",)), SOURCES).env == []


def test_applied_references_keep_the_users_own_entries_and_hold_no_value() -> None:
    pod: dict[str, Any] = {
        "spec": {
            "containers": [
                {
                    "name": "base",
                    "env": [{"name": "AIRFLOW_CONN_CRM", "value": "http://override"}],
                    "envFrom": [{"configMapRef": {"name": "mine"}}],
                }
            ]
        }
    }
    references = plan_references(task(connections=("crm", "warehouse")), SOURCES)
    container = apply_references(pod, references)["spec"]["containers"][0]
    assert container["env"] == [
        {"name": "AIRFLOW_CONN_CRM", "value": "http://override"},
        {
            "name": "AIRFLOW_CONN_WAREHOUSE",
            "valueFrom": {"secretKeyRef": {"name": "conns-a", "key": "warehouse"}},
        },
    ]
    assert container["envFrom"][-1] == {"configMapRef": {"name": "mine"}}  # last: the user's wins
    assert "value" not in container["env"][1]  # a reference only: the kubelet resolves it


def test_a_python_dag_names_connections_and_variables_as_operator_arguments(tmp_path: Path) -> None:
    (tmp_path / "etl.py").write_text(
        "from zonda.authoring import DAG\n"
        "from zonda.operators.bash import BashOperator\n"
        "with DAG('etl', schedule=None, default_args={'variables': ['api_token']}):\n"
        "    BashOperator(task_id='load', bash_command='echo', connections=['warehouse'])\n"
    )
    report = rendering.render_paths([tmp_path])
    manifest = report.dags[0].manifest
    assert manifest is not None, report
    resolved = dags.resolve_dag("etl", DagSpec.model_validate(manifest["spec"])).tasks["load"]
    assert secret_env(plan_references(resolved, SOURCES)) == {
        "AIRFLOW_CONN_WAREHOUSE": ("conns-a", "warehouse"),
        "AIRFLOW_VAR_API_TOKEN": ("vault-vars", "api_token"),
    }
