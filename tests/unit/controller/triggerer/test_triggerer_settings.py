"""The triggerer's settings are one typed object; the CLI's options are checked against it."""

from __future__ import annotations

import click
import pytest

from controller.cli.main import main
from controller.triggerer.__main__ import parse_arguments
from controller.triggerer.settings import DEFAULTS, TriggererSettings


def test_every_tunable_setting_is_a_zonda_triggerer_option_with_the_same_default() -> None:
    command = main.commands["triggerer"]
    assert isinstance(command, click.Command)
    options = {param.name: param.default for param in command.params}
    for setting in ("capacity", "lease_duration", "renew_every", "health_port", "metrics_port"):
        assert options[setting] == getattr(DEFAULTS, setting), setting
    assert "shards" in options and "identity" in options


def test_python_m_controller_triggerer_has_the_same_defaults() -> None:
    arguments = parse_arguments(["--namespace", "ns"])
    for setting in ("shards", "capacity", "lease_duration", "renew_every", "bind_host"):
        assert getattr(arguments, setting) == getattr(DEFAULTS, setting), setting


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        pytest.param({"shards": 0}, "shards must be at least 1", id="no shards"),
        pytest.param({"capacity": -1}, "capacity non-negative", id="negative capacity"),
        pytest.param(
            {"renew_every": 15, "lease_duration": 15}, "renew_every must be shorter", id="lapsing leases"
        ),
    ],
)
def test_impossible_settings_are_refused_when_read(changes: dict[str, float], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        TriggererSettings(namespace="ns", identity="me", **changes)  # type: ignore[arg-type]


def test_settings_are_frozen_and_namespaces_a_tuple() -> None:
    settings = TriggererSettings(namespace="ns", identity="me", watch_namespaces=["a", "b"])
    assert settings.watch_namespaces == ("a", "b")
    with pytest.raises(AttributeError):
        settings.shards = 3  # type: ignore[misc]
