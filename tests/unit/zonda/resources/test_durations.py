"""Durations (``30s``, ``1h30m``): parsing, canonical formatting, and the JSON-schema pattern."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zonda.resources.durations import DURATION_PATTERN, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("90s", timedelta(seconds=90), id="seconds are not normalised away on input"),
        pytest.param("1h30m", timedelta(hours=1, minutes=30), id="parts are summed"),
        pytest.param("30m1h", timedelta(hours=1, minutes=30), id="parts may come in any order, as in Go"),
        pytest.param("0.5h", timedelta(minutes=30), id="a fraction of an hour"),
        pytest.param("0.1s", timedelta(milliseconds=100), id="decimal fractions are exact"),
        pytest.param("250ms", timedelta(milliseconds=250), id="milliseconds are not minutes"),
        pytest.param("1m1ms", timedelta(minutes=1, milliseconds=1), id="minutes then milliseconds"),
        pytest.param("1d", timedelta(days=1), id="a day is 24 hours"),
        pytest.param("2w", timedelta(weeks=2), id="a week is 7 days"),
        pytest.param("1w2d3h4m5s6ms", timedelta(9, 3 * 3600 + 4 * 60 + 5, 6000), id="every unit at once"),
        pytest.param("0s", timedelta(0), id="zero is a duration"),
    ],
)
def test_parse_duration_reads_units(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", "cannot be empty", id="empty text is refused"),
        pytest.param("-5m", "cannot be negative", id="negative durations are refused"),
        pytest.param("5", "expected a sequence", id="a number without a unit is refused"),
        pytest.param("5 m", "expected a sequence", id="spaces are refused"),
        pytest.param("5m\n", "expected a sequence", id="a trailing newline is refused"),
        pytest.param("5M", "expected a sequence", id="units are lower case"),
        pytest.param("1y", "expected a sequence", id="years are not a fixed duration"),
        pytest.param(".5h", "expected a sequence", id="a fraction needs a leading digit"),
        pytest.param("soon", "expected a sequence", id="garbage is refused"),
        pytest.param("99999999999w", "too large", id="durations beyond timedelta's range are refused"),
    ],
)
def test_parse_duration_rejects_bad_input(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        parse_duration(text)
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        pytest.param(timedelta(hours=1, minutes=30), "1h30m", id="hours and minutes"),
        pytest.param(timedelta(seconds=90), "1m30s", id="seconds carry into minutes"),
        pytest.param(timedelta(0), "0s", id="zero is 0s"),
        pytest.param(timedelta(days=8), "1w1d", id="weeks are the largest unit"),
        pytest.param(timedelta(milliseconds=1500), "1s500ms", id="milliseconds below a second"),
        pytest.param(timedelta(microseconds=1500), "1.5ms", id="microseconds as a fraction of a millisecond"),
    ],
)
def test_format_duration_is_canonical(delta: timedelta, expected: str) -> None:
    assert format_duration(delta) == expected


def test_format_duration_rejects_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        format_duration(timedelta(seconds=-1))


@pytest.mark.parametrize("text", ["30s", "1h30m", "0.5h", "1w2d3h4m5s6ms"])
def test_pattern_accepts_what_parse_accepts(text: str) -> None:
    assert re.fullmatch(DURATION_PATTERN, text)


@pytest.mark.parametrize("text", ["", "-1s", "1", "1h ", "h"])
def test_pattern_is_anchored(text: str) -> None:
    assert not re.search(DURATION_PATTERN, text)


def test_pattern_avoids_syntax_json_schema_engines_lack() -> None:
    # Kubernetes validates CRD patterns with RE2: no look-arounds, no back-references, no named groups.
    for construct in ("(?=", "(?!", "(?<", "\\1", "(?P"):
        assert construct not in DURATION_PATTERN


@settings(max_examples=200, deadline=None)
@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=10_000)))
def test_format_then_parse_round_trips(delta: timedelta) -> None:
    text = format_duration(delta)
    assert re.fullmatch(DURATION_PATTERN, text)
    assert parse_duration(text) == delta


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 500), st.sampled_from(["ms", "s", "m", "h", "d", "w"])),
        min_size=1,
        max_size=6,
    )
)
def test_formatting_a_parsed_duration_is_a_fixed_point(parts: list[tuple[int, str]]) -> None:
    text = "".join(f"{n}{unit}" for n, unit in parts)
    canonical = format_duration(parse_duration(text))
    assert format_duration(parse_duration(canonical)) == canonical
