"""The triggers' one clock: `utcnow()`, which tests and the triggerer can replace.

Named after `airflow.utils.timezone` so a trigger ported from Airflow changes only its imports
(``from airflow.utils import timezone`` becomes ``from zonda.triggers import timezone``). Triggers are
the one place in `zonda` where code legitimately waits on real time; they read it here and nowhere
else, and they wait with `asyncio.sleep`, so a test drives both with one fake event-loop clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

#: A source of timezone-aware UTC datetimes.
Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """The wall clock, timezone-aware UTC."""
    return datetime.now(UTC)


_clock: Clock = system_clock


def utcnow() -> datetime:
    """Now, timezone-aware UTC, from the installed clock (the wall clock unless a test installed one)."""
    return _clock()


@contextmanager
def use_clock(clock: Clock) -> Iterator[None]:
    """Install `clock` as the triggers' clock for the duration of the block."""
    global _clock
    previous, _clock = _clock, clock
    try:
        yield
    finally:
        _clock = previous


def convert_to_utc(moment: datetime) -> datetime:
    """`moment` in UTC; a naive datetime is refused rather than guessed (Airflow's triggers do the same)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(
            "You cannot pass naive datetimes: the passed datetime must be using Pendulum's UTC timezone "
            f"(or carry another explicit offset), got {moment.isoformat()!r}"
        )
    return moment.astimezone(UTC)
