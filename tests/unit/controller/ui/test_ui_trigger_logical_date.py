"""The UI's trigger takes an optional `logicalDate`: none gives `zonda.schedules.manual_runs`' default
(now, or no logical date for an Airflow 3 DAG); a bad one is a 400 naming it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.ui import actions


def test_an_empty_logical_date_is_none_and_an_iso_one_is_parsed() -> None:
    assert actions._logical_date(None) is None
    assert actions._logical_date("") is None
    assert actions._logical_date("2026-01-01T00:00:00+00:00") == datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "message"), [("tomorrow", "logicalDate"), ("2026-01-01T00:00:00", "timezone")]
)
def test_a_bad_logical_date_is_refused_naming_it(value: str, message: str) -> None:
    with pytest.raises(actions.ActionRefused) as refused:
        actions._logical_date(value)
    assert refused.value.status == 400 and message in refused.value.text
