"""The controller's wall clock, one for the process: what every pass is given as `now` and what the
work queue turns wake-up times into delays with.

Fault injection only: with `$ZONDA_CLOCK_OFFSET_FILE` set, the clock is shifted by the seconds that
file holds (a float, may be negative), re-read whenever the file changes — the process's clock jumps
ahead or behind while it runs, as a node's clock stepped by NTP would, and nothing else's does. The
monotonic clock (leases, timeouts of API calls) is not shifted: a real step leaves it alone too.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pendulum

OFFSET_FILE_ENV = "ZONDA_CLOCK_OFFSET_FILE"

_read: tuple[float, float] | None = None  # (the file's mtime, its offset in seconds)


def offset() -> timedelta:
    """The shift the offset file asks for (zero without one)."""
    global _read
    path = os.environ.get(OFFSET_FILE_ENV)
    if not path:
        return timedelta(0)
    try:
        changed = os.stat(path).st_mtime_ns
    except OSError:
        return timedelta(0)
    if _read is None or _read[0] != changed:
        try:
            with open(path) as text:
                _read = (changed, float(text.read().strip() or 0))
        except (OSError, ValueError):
            return timedelta(seconds=_read[1]) if _read else timedelta(0)
    return timedelta(seconds=_read[1])


def utcnow() -> datetime:
    """Now, in UTC (a pendulum DateTime: what the core's schedules compute with)."""
    now = pendulum.now("UTC")
    shift = offset()
    return now + shift if shift else now  # a pendulum sum costs more than the clock read itself


def now_utc() -> datetime:
    """Now, in UTC, as a plain datetime (for delays)."""
    now = datetime.now(UTC)
    shift = offset()
    return now + shift if shift else now
