"""`controller.processes.clock`: one clock for the controller, shifted only by the fault-injection file."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controller.processes import clock


def test_without_the_offset_file_the_clock_is_the_real_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(clock.OFFSET_FILE_ENV, raising=False)
    assert clock.offset() == timedelta(0)
    assert abs(clock.now_utc() - datetime.now(UTC)) < timedelta(seconds=5)


def test_the_clock_jumps_when_the_offset_file_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "offset"
    monkeypatch.setenv(clock.OFFSET_FILE_ENV, str(path))
    assert clock.offset() == timedelta(0), "no file yet: not shifted"
    path.write_text("3600")
    assert abs(clock.utcnow() - datetime.now(UTC) - timedelta(hours=1)) < timedelta(seconds=5)
    path.write_text("-90.5")
    os.utime(path, ns=(1, 1))  # a change the mtime shows even within one clock tick
    assert clock.offset() == timedelta(seconds=-90.5)
    assert abs(clock.now_utc() - datetime.now(UTC) + timedelta(seconds=90.5)) < timedelta(seconds=5)
