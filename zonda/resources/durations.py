"""Durations as Zonda's resources spell them: ``30s``, ``5m``, ``1h30m``, ``0.5h``.

The grammar is Go's ``time.ParseDuration`` (which Kubernetes users already read every day) minus the
sign and plus days and weeks: a non-empty sequence of ``<number><unit>`` parts, summed, in any order.
Units are ``ms s m h d w``; a day is always 24 hours and a week 7 days, because these durations measure
elapsed time (timeouts, retry delays, ``schedule: 30m``), never calendar arithmetic across DST.

Arithmetic is done in :class:`~decimal.Decimal` so that ``0.1s`` is exactly 100 ms, and
:func:`format_duration` is the exact inverse of :func:`parse_duration` for every non-negative
:class:`~datetime.timedelta` (down to the microsecond).
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation

__all__ = ["DURATION_PATTERN", "format_duration", "parse_duration"]

#: Anchored, and written in the common subset of ECMA-262 and RE2 regular expressions (no look-arounds),
#: so that the very same string can be a JSON-schema / CRD ``pattern``.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h|d|w))+$"

_MATCHER = re.compile(DURATION_PATTERN)
_PARTS = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d|w)")

_MICROSECONDS_PER_UNIT: dict[str, int] = {
    "w": 7 * 24 * 3600 * 1_000_000,
    "d": 24 * 3600 * 1_000_000,
    "h": 3600 * 1_000_000,
    "m": 60 * 1_000_000,
    "s": 1_000_000,
    "ms": 1_000,
}
_EXAMPLES = "such as '30s', '5m', '1h30m' or '0.5h' (units: ms, s, m, h, d, w)"


def parse_duration(text: str) -> timedelta:
    """Turn ``1h30m`` into ``timedelta(hours=1, minutes=30)``.

    Raises :class:`ValueError` naming the offending text for empty, negative, malformed or
    out-of-range input; fractions finer than a microsecond are rounded half-to-even.
    """
    if not isinstance(text, str):
        raise ValueError(f"invalid duration {text!r}: expected a string {_EXAMPLES}")
    if not text:
        raise ValueError(f"invalid duration '': a duration cannot be empty; write one {_EXAMPLES}")
    if text.startswith("-"):
        raise ValueError(f"invalid duration {text!r}: durations cannot be negative")
    if not _MATCHER.fullmatch(text):  # fullmatch: Python's `$` also matches before a final newline
        raise ValueError(f"invalid duration {text!r}: expected a sequence of <number><unit> {_EXAMPLES}")
    try:
        total = sum(
            (Decimal(number) * _MICROSECONDS_PER_UNIT[unit] for number, unit in _PARTS.findall(text)),
            start=Decimal(0),
        )
        return timedelta(microseconds=int(total.to_integral_value()))
    except (OverflowError, InvalidOperation) as exc:
        raise ValueError(f"invalid duration {text!r}: too large to represent") from exc


def format_duration(delta: timedelta) -> str:
    """Spell ``delta`` canonically: largest units first, each at most once, ``0s`` for zero.

    The sub-second remainder is written in milliseconds, with a decimal fraction when it is not a whole
    number of them (``1.5ms``), so that ``parse_duration(format_duration(d)) == d`` always holds.
    """
    if delta < timedelta(0):
        raise ValueError(f"cannot format negative duration {delta!r}: durations cannot be negative")
    remaining = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if remaining == 0:
        return "0s"
    parts: list[str] = []
    for unit in ("w", "d", "h", "m", "s"):
        count, remaining = divmod(remaining, _MICROSECONDS_PER_UNIT[unit])
        if count:
            parts.append(f"{count}{unit}")
    if remaining:
        millis = Decimal(remaining) / 1_000
        parts.append(f"{_plain(millis)}ms")
    return "".join(parts)


def _plain(number: Decimal) -> str:
    """Render without exponent and without trailing zeros (``1.500`` -> ``1.5``, ``2`` -> ``2``)."""
    text = format(number, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
