"""`zonda controller`'s options and `ControllerSettings` cannot disagree: same names, same defaults.

Every settings field is set by the option of the same name, or derived as `DERIVED` says; every
option's default is the field's default (`DEFAULTS`), so `--help` shows what the process uses.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from controller.cli.main import controller, main
from controller.manager import settings as settings_module
from controller.manager.settings import DEFAULTS, ControllerSettings

#: Fields no option names directly, and where they come from.
DERIVED = {
    "pod_defaults": "--task-image, --task-service-account, --task-resources, --task-node-selector, "
    "$ZONDA_TASK_IMAGE_PULL_SECRETS",
    "leader_election": "--peering given",
    "leader_namespace": "$POD_NAMESPACE",
    "identity": "host name and pid",
}
#: Options that configure the CLI itself, not the process's settings.
CLI_ONLY = {
    "all_namespaces",
    "log_format",
    "task_image",
    "task_service_account",
    "task_resources",
    "task_node_selector",
}


def options() -> dict[str, click.Parameter]:
    return {param.name: param for param in controller.params if param.name is not None}


def test_every_field_is_an_option_or_derived() -> None:
    fields = {f.name for f in dataclasses.fields(ControllerSettings)}
    named = set(options()) - CLI_ONLY
    assert fields - named == set(DERIVED)
    assert named <= fields  # (--peering's destination is leader_lease)


@pytest.mark.parametrize("name", sorted(set(options()) - CLI_ONLY - {"namespaces", "leader_lease"}))
def test_option_defaults_are_the_settings_defaults(name: str) -> None:
    assert options()[name].default == getattr(DEFAULTS, name)


def test_the_task_image_default_is_the_pod_defaults() -> None:
    assert options()["task_image"].default == DEFAULTS.pod_defaults.image


def test_the_environment_is_read_once_into_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    read = settings_module._environment(
        {
            "ZONDA_STATE_DIR": "/srv/zonda",
            "ZONDA_TRIGGER_SHARDS": "4",
            "POD_NAMESPACE": "ops",
            "ZONDA_TASK_IMAGE_PULL_SECRETS": '["regcred"]',
            "ZONDA_XCOM_BACKEND_URL": "s3://bucket/xcom",
        }
    )
    assert read == {
        "state_dir": Path("/srv/zonda"),
        "trigger_shards": 4,
        "leader_namespace": "ops",
        "image_pull_secrets": ("regcred",),
        "task_env": ({"name": "ZONDA_XCOM_BACKEND_URL", "value": "s3://bucket/xcom"},),
    }


def test_the_cli_builds_the_settings_the_process_runs_with(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[ControllerSettings] = []
    monkeypatch.setattr("controller.manager.main.run_controller", seen.append)
    result = CliRunner().invoke(
        main,
        [
            "controller",
            "-n",
            "a",
            "-n",
            "b",
            "--executor",
            "local",
            "--workers",
            "2",
            "--peering",
            "lead",
            "--task-image",
            "img:1",
            "--task-node-selector",
            '{"zonda.dev/node": "real"}',
        ],
    )
    assert result.exit_code == 0, result.output
    (settings,) = seen
    assert settings.namespaces == ("a", "b")
    assert (settings.executor, settings.workers, settings.parallelism) == ("local", 2, DEFAULTS.parallelism)
    assert (settings.leader_election, settings.leader_lease) == (True, "lead")
    assert settings.pod_defaults.image == "img:1"
    assert settings.pod_defaults.node_selector == {"zonda.dev/node": "real"}
    assert settings.pod_defaults.image_pull_secrets == DEFAULTS.pod_defaults.image_pull_secrets


@pytest.mark.parametrize("selector", ["zonda.dev/node=real", '["real"]', '{"zonda.dev/node": 1}'])
def test_a_task_node_selector_that_is_not_a_json_object_of_strings_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, selector: str
) -> None:
    monkeypatch.setattr("controller.manager.main.run_controller", lambda settings: None)
    result = CliRunner().invoke(main, ["controller", "-n", "a", "--task-node-selector", selector])
    assert result.exit_code == 2 and "--task-node-selector" in result.output, result.output


def test_a_namespace_pattern_is_a_usage_error_and_an_exact_name_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kopf expanded globs; the DagRun and task pod watches (controller.kube.follow) take names."""
    ran: list[ControllerSettings] = []
    monkeypatch.setattr("controller.manager.main.run_controller", ran.append)
    assert CliRunner().invoke(main, ["controller", "-n", "team-a"]).exit_code == 0
    assert ran[0].namespaces == ("team-a",)
    result = CliRunner().invoke(main, ["controller", "-n", "team-a", "-n", "team-*"])
    assert result.exit_code == 2 and "not patterns: team-*" in result.output, result.output
    assert len(ran) == 1
