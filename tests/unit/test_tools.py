"""The missing-tool rule of `tests.tools`: under CI a missing tool fails the test, elsewhere it skips."""

from __future__ import annotations

import pytest

from tests.tools import require_executable, tool_missing


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_under_ci_a_missing_tool_fails_with_the_reason(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="no-such-tool-zonda is not installed: apt-get it"):
        require_executable("no-such-tool-zonda", "apt-get it")


@pytest.mark.parametrize("value", [None, "", "false", "0"])
def test_elsewhere_a_missing_tool_skips_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception, match="why it is missing"):
        tool_missing("why it is missing")


def test_a_present_tool_is_returned_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The positive control: the rule only acts on what is missing (`sh` is on every machine)."""
    monkeypatch.setenv("CI", "true")
    assert require_executable("sh", "unused").endswith("/sh")
