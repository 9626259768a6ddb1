"""Airflow 3.2+'s partition mappers, windows and wait policies (`airflow.sdk` names, Airflow's
constructor signatures), and what they decide: which downstream partition key(s) an upstream event's
key maps to, and which upstream keys a rollup waits for.

The same classes are the authoring API (`--airflow-compat` maps `airflow.sdk.IdentityMapper`... here)
and the scheduler's: a DAG file's mapper is written into the manifest (`to_manifest`) and read back by
the controller (`mapper_from_manifest`), so what runs is what was written. The semantics follow
Airflow 3.3's scheduler-side classes (`airflow.partition_mappers`): a temporal mapper parses the key
with its `input_format` in its timezone, normalises it to the start of its period and formats it with
its `output_format`; a rollup's window lists the upstream periods of one downstream period, each
encoded back with the upstream mapper's `input_format`.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import pendulum

#: Airflow's `[scheduler] partition_mapper_max_downstream_keys` default.
DEFAULT_MAX_DOWNSTREAM_KEYS = 1000


class PartitionSpecInvalid(ValueError):
    """A partition mapper, window or wait policy in a manifest that Zonda cannot read."""


def _check_cap(value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"max_downstream_keys must be a positive integer or None, got {value!r}")
    return value


# ------------------------------------------------------------------ wait policies


class WaitPolicy:
    """When a rollup fires, given the upstream keys it expects and those that arrived."""

    kind: ClassVar[str] = ""

    def is_satisfied(self, matched: int, expected: int) -> bool:
        raise NotImplementedError

    def to_manifest(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_manifest() == self.to_manifest()

    def __hash__(self) -> int:
        return hash(repr(self.to_manifest()))


class WaitForAll(WaitPolicy):
    """Fires only when every expected upstream key has arrived."""

    kind = "WaitForAll"

    def is_satisfied(self, matched: int, expected: int) -> bool:
        return matched >= expected


class MinimumCount(WaitPolicy):
    """`n > 0`: fires once `n` keys arrived; `n < 0`: once at most `-n` are missing."""

    kind = "MinimumCount"

    def __init__(self, n: int) -> None:
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"MinimumCount n must be an int, got {n!r}")
        if n == 0:
            raise ValueError(
                "MinimumCount(0) is degenerate: n=0 would always fire, even on empty windows. "
                "Use WaitForAll() to require every key, or MinimumCount(n) with n != 0."
            )
        self.n = n

    def is_satisfied(self, matched: int, expected: int) -> bool:
        return matched >= (self.n if self.n > 0 else max(0, expected + self.n))

    def to_manifest(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n}


# ------------------------------------------------------------------ windows


def _shift_months(value: dt.datetime, months: int) -> dt.datetime:
    total = value.month - 1 + months
    return value.replace(year=value.year + total // 12, month=total % 12 + 1)


def _require_day_one(value: dt.datetime, window: type) -> None:
    if value.day != 1:
        raise ValueError(f"{window.__name__} expects a period start on day 1 of the month, got {value}")


class Window:
    """Which upstream periods (or segments) make up one downstream period."""

    class Direction(enum.StrEnum):
        BACKWARD = "backward"
        FORWARD = "forward"

    kind: ClassVar[str] = "Window"
    expected_decoded_type: ClassVar[type] = str
    #: (count, step) of the shipped temporal windows; None: not a fixed-count window.
    _steps: ClassVar[tuple[int, str] | None] = None

    def __init__(self, *, direction: Window.Direction | str = Direction.FORWARD) -> None:
        self.direction = self.Direction(direction)

    def to_upstream(self, start: Any) -> list[Any]:
        if self._steps is None:
            raise NotImplementedError(f"{type(self).__name__} does not list its upstream periods")
        count, unit = self._steps
        if unit == "months":
            _require_day_one(start, type(self))

        def step(base: dt.datetime, i: int) -> dt.datetime:
            if unit == "months":
                return _shift_months(base, i)
            return base + dt.timedelta(**{unit: i})

        base = step(start, -(count - 1)) if self.direction is Window.Direction.BACKWARD else start
        return [step(base, i) for i in range(count)]

    def to_manifest(self) -> dict[str, Any]:
        return {"kind": self.kind, "direction": self.direction.value}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_manifest() == self.to_manifest()

    def __hash__(self) -> int:
        return hash(repr(self.to_manifest()))


class HourWindow(Window):
    """Sixty consecutive minute keys making up one hour."""

    kind = "HourWindow"
    expected_decoded_type = dt.datetime
    _steps = (60, "minutes")


class DayWindow(Window):
    """Twenty-four consecutive hourly keys making up one day."""

    kind = "DayWindow"
    expected_decoded_type = dt.datetime
    _steps = (24, "hours")


class WeekWindow(Window):
    """Seven consecutive daily keys making up one week."""

    kind = "WeekWindow"
    expected_decoded_type = dt.datetime
    _steps = (7, "days")


class MonthWindow(Window):
    """All daily keys making up one calendar month (28 to 31)."""

    kind = "MonthWindow"
    expected_decoded_type = dt.datetime

    def to_upstream(self, start: Any) -> list[Any]:
        _require_day_one(start, type(self))
        if self.direction is Window.Direction.BACKWARD:
            previous = _shift_months(start, -1)
            return [previous + dt.timedelta(days=i + 1) for i in range((start - previous).days)]
        following = _shift_months(start, 1)
        return [start + dt.timedelta(days=i) for i in range((following - start).days)]


class QuarterWindow(Window):
    """Three consecutive monthly keys making up one calendar quarter."""

    kind = "QuarterWindow"
    expected_decoded_type = dt.datetime
    _steps = (3, "months")


class YearWindow(Window):
    """Twelve consecutive monthly keys making up one calendar year."""

    kind = "YearWindow"
    expected_decoded_type = dt.datetime
    _steps = (12, "months")


class SegmentWindow(Window):
    """A fixed categorical set of keys that make up one downstream partition."""

    kind = "SegmentWindow"
    expected_decoded_type = str

    def __init__(self, segments: Iterable[str]) -> None:
        super().__init__()
        validated: list[str] = []
        for i, item in enumerate(segments):
            if not isinstance(item, str):
                raise ValueError(
                    f"SegmentWindow segment keys must be str; got {type(item).__name__!r} at index {i}: "
                    f"{item!r}"
                )
            if not item:
                raise ValueError(
                    f"SegmentWindow segment keys must be non-empty; got an empty string at index {i}."
                )
            validated.append(item)
        if not validated:
            raise ValueError("SegmentWindow requires at least one segment key; got an empty iterable.")
        self.segments = frozenset(validated)

    def to_upstream(self, start: Any) -> list[Any]:
        return sorted(self.segments)

    def to_manifest(self) -> dict[str, Any]:
        return {"kind": self.kind, "segments": sorted(self.segments)}


WINDOWS: dict[str, type[Window]] = {
    w.kind: w
    for w in (HourWindow, DayWindow, WeekWindow, MonthWindow, QuarterWindow, YearWindow, SegmentWindow)
}


# ------------------------------------------------------------------ mappers


class PartitionMapper:
    """Maps an upstream event's partition key to the consumer run's key (or keys)."""

    kind: ClassVar[str] = ""
    is_rollup: ClassVar[bool] = False
    expected_decoded_type: ClassVar[type] = str

    def __init__(self, *, max_downstream_keys: int | None = None) -> None:
        self.max_downstream_keys = _check_cap(max_downstream_keys)

    def to_downstream(self, key: str) -> str | list[str]:
        raise NotImplementedError

    def decode_downstream(self, key: str) -> Any:
        return key

    def encode_upstream(self, decoded: Any) -> str:
        return str(decoded)

    def format(self, decoded: Any) -> str:
        return decoded.isoformat() if isinstance(decoded, dt.datetime) else str(decoded)

    def to_partition_date(self, downstream_key: str) -> dt.datetime | None:
        """The start of the downstream key's period (Airflow's `to_partition_date`); None: not a time."""
        return None

    def _fields(self) -> dict[str, Any]:
        return {}

    def to_manifest(self) -> dict[str, Any]:
        found = {"kind": self.kind, **self._fields()}
        if self.max_downstream_keys is not None:
            found["maxDownstreamKeys"] = self.max_downstream_keys
        return found

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_manifest() == self.to_manifest()

    def __hash__(self) -> int:
        return hash(repr(self.to_manifest()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._fields()!r})"


class IdentityMapper(PartitionMapper):
    """The downstream key is the upstream key."""

    kind = "IdentityMapper"

    def to_downstream(self, key: str) -> str:
        return key


class AllowedKeyMapper(PartitionMapper):
    """The upstream key, if it is one of `allowed_keys` (else the event is not mapped)."""

    kind = "AllowedKeyMapper"

    def __init__(self, allowed_keys: list[str], *, max_downstream_keys: int | None = None) -> None:
        super().__init__(max_downstream_keys=max_downstream_keys)
        if not isinstance(allowed_keys, list | tuple | set | frozenset) or not all(
            isinstance(k, str) for k in allowed_keys
        ):
            raise TypeError(f"AllowedKeyMapper allowed_keys must be a list of str, got {allowed_keys!r}")
        self.allowed_keys = list(allowed_keys)

    def to_downstream(self, key: str) -> str:
        if key not in self.allowed_keys:
            raise ValueError(f"Key {key!r} not in allowed keys {self.allowed_keys}")
        return key

    def _fields(self) -> dict[str, Any]:
        return {"allowedKeys": list(self.allowed_keys)}


class FixedKeyMapper(PartitionMapper):
    """Every upstream key maps to one fixed downstream key."""

    kind = "FixedKeyMapper"

    def __init__(self, downstream_key: str, *, max_downstream_keys: int | None = None) -> None:
        if not downstream_key or not isinstance(downstream_key, str):
            raise ValueError(
                f"FixedKeyMapper downstream_key must be a non-empty str; got {downstream_key!r}."
            )
        super().__init__(max_downstream_keys=max_downstream_keys)
        self.downstream_key = downstream_key

    def to_downstream(self, key: str) -> str:
        return self.downstream_key

    def _fields(self) -> dict[str, Any]:
        return {"downstreamKey": self.downstream_key}


class _BaseTemporalMapper(PartitionMapper):
    default_output_format: ClassVar[str] = ""
    expected_decoded_type = dt.datetime

    def __init__(
        self,
        *,
        timezone: Any = "UTC",
        input_format: str = "%Y-%m-%dT%H:%M:%S",
        output_format: str | None = None,
        max_downstream_keys: int | None = None,
    ) -> None:
        super().__init__(max_downstream_keys=max_downstream_keys)
        self.input_format = input_format
        self.output_format = output_format or self.default_output_format
        self.timezone_name = (
            timezone if isinstance(timezone, str) else str(getattr(timezone, "name", timezone))
        )
        try:
            self._timezone = pendulum.timezone(self.timezone_name)
        except Exception as error:  # pendulum raises its own for an unknown name
            raise ValueError(f"{type(self).__name__}: unknown timezone {self.timezone_name!r}") from error

    def normalize(self, value: dt.datetime) -> dt.datetime:
        raise NotImplementedError

    def to_downstream(self, key: str) -> str:
        parsed = dt.datetime.strptime(key, self.input_format)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=self._timezone)
        else:
            parsed = parsed.astimezone(self._timezone)
        return self.format(self.normalize(parsed))

    def format(self, decoded: Any) -> str:
        return str(decoded.strftime(self.output_format))

    def decode_downstream(self, key: str) -> dt.datetime:
        return dt.datetime.strptime(key, self.output_format)

    def to_partition_date(self, downstream_key: str) -> dt.datetime | None:
        anchor = self.normalize(self.decode_downstream(downstream_key))
        return anchor if anchor.tzinfo is not None else anchor.replace(tzinfo=self._timezone)

    def encode_upstream(self, decoded: Any) -> str:
        naive = decoded.astimezone(self._timezone).replace(tzinfo=None) if decoded.tzinfo else decoded
        return str(naive.replace(tzinfo=self._timezone).strftime(self.input_format))

    def _fields(self) -> dict[str, Any]:
        return {
            "timezone": self.timezone_name,
            "inputFormat": self.input_format,
            "outputFormat": self.output_format,
        }


class StartOfHourMapper(_BaseTemporalMapper):
    """`2024-03-13T10:42:15` -> `2024-03-13T10`."""

    kind = "StartOfHourMapper"
    default_output_format = "%Y-%m-%dT%H"

    def normalize(self, value: dt.datetime) -> dt.datetime:
        return value.replace(minute=0, second=0, microsecond=0)


class StartOfDayMapper(_BaseTemporalMapper):
    """`2024-03-13T10:42:15` -> `2024-03-13`."""

    kind = "StartOfDayMapper"
    default_output_format = "%Y-%m-%d"

    def normalize(self, value: dt.datetime) -> dt.datetime:
        return value.replace(hour=0, minute=0, second=0, microsecond=0)


def _key_pattern(fmt: str) -> re.Pattern[str]:
    """`%Y`, `%m`, `%d`, `%V`... and `{name}` of an output format as named groups (Airflow's
    `_compile_output_format_regex`, for the formats its week and quarter mappers decode)."""
    parts, i = [], 0
    while i < len(fmt):
        if fmt[i] == "%" and i + 1 < len(fmt) and fmt[i + 1] in "YmdHMSVUW":
            width = 4 if fmt[i + 1] == "Y" else 2
            parts.append(f"(?P<{fmt[i + 1]}>\\d{{{width}}})")
            i += 2
        elif fmt[i] == "{" and (end := fmt.find("}", i)) != -1:
            parts.append(f"(?P<{fmt[i + 1 : end]}>\\w+)")
            i = end + 1
        else:
            parts.append(re.escape(fmt[i]))
            i += 1
    return re.compile(f"^{''.join(parts)}$")


class StartOfWeekMapper(_BaseTemporalMapper):
    """`2024-03-13T10:42:15` -> `2024-03-11 (W11)` (the Monday of its ISO week)."""

    kind = "StartOfWeekMapper"
    default_output_format = "%Y-%m-%d (W%V)"

    def normalize(self, value: dt.datetime) -> dt.datetime:
        return (value - dt.timedelta(days=value.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)

    def decode_downstream(self, key: str) -> dt.datetime:
        match = _key_pattern(self.output_format).search(key)
        if match is None or not {"Y", "m", "d"}.issubset(match.groupdict()):
            raise ValueError(
                f"StartOfWeekMapper could not parse {key!r} with output_format {self.output_format!r}"
            )
        return dt.datetime(int(match["Y"]), int(match["m"]), int(match["d"]))


class StartOfMonthMapper(_BaseTemporalMapper):
    """`2024-03-13T10:42:15` -> `2024-03`."""

    kind = "StartOfMonthMapper"
    default_output_format = "%Y-%m"

    def normalize(self, value: dt.datetime) -> dt.datetime:
        return value.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


class StartOfQuarterMapper(_BaseTemporalMapper):
    """`2024-03-13T10:42:15` -> `2024-Q1`."""

    kind = "StartOfQuarterMapper"
    default_output_format = "%Y-Q{quarter}"

    def normalize(self, value: dt.datetime) -> dt.datetime:
        month = (value.month - 1) // 3 * 3 + 1
        return value.replace(month=month, day=1, hour=0, minute=0, second=0, microsecond=0)

    def format(self, decoded: Any) -> str:
        return str(decoded.strftime(self.output_format)).format(quarter=(decoded.month - 1) // 3 + 1)

    def decode_downstream(self, key: str) -> dt.datetime:
        match = _key_pattern(self.output_format).search(key)
        if match is None or not {"Y", "quarter"}.issubset(match.groupdict()):
            raise ValueError(
                f"StartOfQuarterMapper could not parse {key!r} with output_format {self.output_format!r}"
            )
        return dt.datetime(int(match["Y"]), (int(match["quarter"]) - 1) * 3 + 1, 1)


class StartOfYearMapper(_BaseTemporalMapper):
    """`2024-03-13T10:42:15` -> `2024`."""

    kind = "StartOfYearMapper"
    default_output_format = "%Y"

    def normalize(self, value: dt.datetime) -> dt.datetime:
        return value.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)


class ProductMapper(PartitionMapper):
    """A composite key (`region|timestamp`): each segment mapped by its own mapper."""

    kind = "ProductMapper"

    def __init__(
        self,
        mapper0: PartitionMapper,
        mapper1: PartitionMapper,
        /,
        *mappers: PartitionMapper,
        delimiter: str = "|",
        max_downstream_keys: int | None = None,
    ) -> None:
        super().__init__(max_downstream_keys=max_downstream_keys)
        self.mappers = _mappers("ProductMapper", [mapper0, mapper1, *mappers])
        self.delimiter = delimiter

    def to_downstream(self, key: str) -> str:
        segments = key.split(self.delimiter)
        if len(segments) != len(self.mappers):
            raise ValueError(f"Expected {len(self.mappers)} segments in key, got {len(segments)}")
        results = []
        for mapper, segment in zip(self.mappers, segments, strict=True):
            result = mapper.to_downstream(segment)
            if not isinstance(result, str):
                raise TypeError(
                    f"ProductMapper child mappers must return a single key, but {type(mapper).__name__} "
                    "returned multiple keys"
                )
            results.append(result)
        return self.delimiter.join(results)

    def to_partition_date(self, downstream_key: str) -> dt.datetime | None:
        """The one time segment's start; None with none or several (Airflow's convention)."""
        segments = downstream_key.split(self.delimiter)
        if len(segments) != len(self.mappers):
            return None
        anchors = [a for m, s in zip(self.mappers, segments, strict=True) if (a := m.to_partition_date(s))]
        return anchors[0] if len(anchors) == 1 else None

    def _fields(self) -> dict[str, Any]:
        return {"delimiter": self.delimiter, "mappers": [m.to_manifest() for m in self.mappers]}


class ChainMapper(PartitionMapper):
    """Mappers applied one after the other."""

    kind = "ChainMapper"

    def __init__(
        self,
        mapper0: PartitionMapper,
        mapper1: PartitionMapper,
        /,
        *mappers: PartitionMapper,
        max_downstream_keys: int | None = None,
    ) -> None:
        super().__init__(max_downstream_keys=max_downstream_keys)
        self.mappers = _mappers("ChainMapper", [mapper0, mapper1, *mappers])

    def to_downstream(self, key: str) -> str | list[str]:
        keys = [key]
        for mapper in self.mappers:
            keys = [k for current in keys for k in _as_list(mapper.to_downstream(current))]
        return keys[0] if len(keys) == 1 else keys

    def _fields(self) -> dict[str, Any]:
        return {"mappers": [m.to_manifest() for m in self.mappers]}


class RollupMapper(PartitionMapper):
    """Many upstream keys -> one downstream key: the run waits for the window's upstream keys."""

    kind = "RollupMapper"
    is_rollup = True

    def __init__(
        self,
        *,
        upstream_mapper: PartitionMapper,
        window: Window,
        wait_policy: WaitPolicy | None = None,
        max_downstream_keys: int | None = None,
    ) -> None:
        super().__init__(max_downstream_keys=max_downstream_keys)
        _mappers("RollupMapper", [upstream_mapper])
        if not isinstance(window, Window):
            raise TypeError(f"RollupMapper window must be a Window, got {window!r}")
        if wait_policy is not None and not isinstance(wait_policy, WaitPolicy):
            raise TypeError(f"RollupMapper wait_policy must be a WaitPolicy, got {wait_policy!r}")
        if upstream_mapper.expected_decoded_type is not window.expected_decoded_type:
            raise TypeError(
                f"{type(window).__name__} expects decoded values of type "
                f"{window.expected_decoded_type.__name__!r}, but {type(upstream_mapper).__name__} decodes to "
                f"{upstream_mapper.expected_decoded_type.__name__!r}. Pair a window and an upstream mapper "
                "whose 'expected_decoded_type' match."
            )
        self.upstream_mapper, self.window = upstream_mapper, window
        self.wait_policy = wait_policy or WaitForAll()

    def to_downstream(self, key: str) -> str | list[str]:
        return self.upstream_mapper.to_downstream(key)

    def to_partition_date(self, downstream_key: str) -> dt.datetime | None:
        return self.upstream_mapper.to_partition_date(downstream_key)

    def to_upstream(self, downstream_key: str) -> frozenset[str]:
        """Every upstream key one downstream key waits for."""
        decoded = self.upstream_mapper.decode_downstream(downstream_key)
        return frozenset(
            self.upstream_mapper.encode_upstream(item) for item in self.window.to_upstream(decoded)
        )

    def _fields(self) -> dict[str, Any]:
        return {
            "upstreamMapper": self.upstream_mapper.to_manifest(),
            "window": self.window.to_manifest(),
            "waitPolicy": self.wait_policy.to_manifest(),
        }


class FanOutMapper(PartitionMapper):
    """One upstream key -> the keys of its window's members (a weekly key -> seven daily runs)."""

    kind = "FanOutMapper"
    default_downstream_mapper_by_window_name: ClassVar[dict[str, type[_BaseTemporalMapper]]] = {
        "DayWindow": StartOfHourMapper,
        "WeekWindow": StartOfDayMapper,
        "MonthWindow": StartOfDayMapper,
        "QuarterWindow": StartOfMonthMapper,
        "YearWindow": StartOfMonthMapper,
    }

    def __init__(
        self,
        *,
        upstream_mapper: PartitionMapper,
        window: Window,
        downstream_mapper: PartitionMapper | None = None,
        max_downstream_keys: int | None = None,
    ) -> None:
        super().__init__(max_downstream_keys=max_downstream_keys)
        _mappers("FanOutMapper", [upstream_mapper])
        if not isinstance(window, Window):
            raise TypeError(f"FanOutMapper window must be a Window, got {window!r}")
        if downstream_mapper is None:
            default = self.default_downstream_mapper_by_window_name.get(type(window).__name__)
            if default is None:
                raise ValueError(
                    f"{type(self).__name__} has no default downstream_mapper for window type "
                    f"{type(window).__name__}; pass downstream_mapper explicitly."
                )
            downstream_mapper = default()
        self.upstream_mapper, self.window, self.downstream_mapper = upstream_mapper, window, downstream_mapper

    def to_downstream(self, key: str) -> list[str]:
        formatted = self.upstream_mapper.to_downstream(key)
        if not isinstance(formatted, str):
            raise TypeError("FanOutMapper.upstream_mapper must produce a single key from to_downstream")
        coarse = self.upstream_mapper.decode_downstream(formatted)
        return [self.downstream_mapper.format(item) for item in self.window.to_upstream(coarse)]

    def to_partition_date(self, downstream_key: str) -> dt.datetime | None:
        return self.downstream_mapper.to_partition_date(downstream_key)

    def _fields(self) -> dict[str, Any]:
        return {
            "upstreamMapper": self.upstream_mapper.to_manifest(),
            "window": self.window.to_manifest(),
            "downstreamMapper": self.downstream_mapper.to_manifest(),
        }


def _mappers(owner: str, mappers: list[Any]) -> list[PartitionMapper]:
    for mapper in mappers:
        if not isinstance(mapper, PartitionMapper):
            raise TypeError(f"{owner}: expected partition mappers, got {mapper!r}")
    return mappers


def _as_list(value: str | Iterable[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


MAPPERS: dict[str, type[PartitionMapper]] = {
    m.kind: m
    for m in (
        IdentityMapper, AllowedKeyMapper, FixedKeyMapper, StartOfHourMapper, StartOfDayMapper,
        StartOfWeekMapper, StartOfMonthMapper, StartOfQuarterMapper, StartOfYearMapper, ProductMapper,
        ChainMapper, RollupMapper, FanOutMapper,
    )
}  # fmt: skip


# ------------------------------------------------------------------ reading a manifest back


def _object(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("kind"), str):
        raise PartitionSpecInvalid(f"{where}: expected an object with a kind")
    return raw


def window_from_manifest(raw: Any, where: str) -> Window:
    raw = _object(raw, where)
    klass = WINDOWS.get(raw["kind"])
    if klass is None:
        raise PartitionSpecInvalid(
            f"{where}.kind: unknown window {raw['kind']!r} (known: {', '.join(WINDOWS)})"
        )
    try:
        if klass is SegmentWindow:
            return SegmentWindow(raw.get("segments") or [])
        return klass(direction=raw.get("direction", "forward"))
    except (TypeError, ValueError) as error:
        raise PartitionSpecInvalid(f"{where}: {error}") from error


def wait_policy_from_manifest(raw: Any, where: str) -> WaitPolicy:
    raw = _object(raw, where)
    try:
        if raw["kind"] == WaitForAll.kind:
            return WaitForAll()
        if raw["kind"] == MinimumCount.kind:
            return MinimumCount(raw.get("n"))
    except (TypeError, ValueError) as error:
        raise PartitionSpecInvalid(f"{where}: {error}") from error
    raise PartitionSpecInvalid(
        f"{where}.kind: unknown wait policy {raw['kind']!r} (WaitForAll, MinimumCount)"
    )


def asset_partitions_from_manifest(
    raw: Any, where: str = "spec.assetPartitions"
) -> tuple[PartitionMapper, dict[str, PartitionMapper]]:
    """`spec.assetPartitions` (`PartitionedAssetTimetable.to_manifest`): (the default mapper, URI ->
    that asset's mapper), or PartitionSpecInvalid saying where."""
    if not isinstance(raw, Mapping):
        raise PartitionSpecInvalid(f"{where}: expected an object with defaultMapper and mappers")
    unknown = sorted(set(raw) - {"defaultMapper", "mappers"})
    if unknown:
        raise PartitionSpecInvalid(f"{where}: unknown field(s) {', '.join(unknown)} (defaultMapper, mappers)")
    default = mapper_from_manifest(
        raw.get("defaultMapper") or {"kind": "IdentityMapper"}, f"{where}.defaultMapper"
    )
    by_uri: dict[str, PartitionMapper] = {}
    items = raw.get("mappers") or []
    if not isinstance(items, list):
        raise PartitionSpecInvalid(f"{where}.mappers: expected a list of {{uri, mapper}}")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("uri"), str) or not item["uri"]:
            raise PartitionSpecInvalid(f"{where}.mappers[{i}]: expected {{uri, mapper}}")
        by_uri[item["uri"]] = mapper_from_manifest(item.get("mapper"), f"{where}.mappers[{i}].mapper")
    return default, by_uri


def mapper_from_manifest(raw: Any, where: str = "mapper") -> PartitionMapper:
    """The mapper a manifest names (`to_manifest`'s output), or PartitionSpecInvalid saying where."""
    raw = _object(raw, where)
    kind, cap = raw["kind"], raw.get("maxDownstreamKeys")
    klass = MAPPERS.get(kind)
    if klass is None:
        raise PartitionSpecInvalid(
            f"{where}.kind: unknown partition mapper {kind!r} (known: {', '.join(MAPPERS)})"
        )
    try:
        if issubclass(klass, _BaseTemporalMapper):
            return klass(
                timezone=raw.get("timezone", "UTC"),
                input_format=raw.get("inputFormat", "%Y-%m-%dT%H:%M:%S"),
                output_format=raw.get("outputFormat"),
                max_downstream_keys=cap,
            )
        if klass is IdentityMapper:
            return IdentityMapper(max_downstream_keys=cap)
        if klass is AllowedKeyMapper:
            return AllowedKeyMapper(list(raw.get("allowedKeys") or []), max_downstream_keys=cap)
        if klass is FixedKeyMapper:
            return FixedKeyMapper(raw.get("downstreamKey"), max_downstream_keys=cap)
        if klass in (ProductMapper, ChainMapper):
            children = raw.get("mappers")
            if not isinstance(children, list) or len(children) < 2:
                raise PartitionSpecInvalid(f"{where}.mappers: expected at least two mappers")
            parsed = [mapper_from_manifest(m, f"{where}.mappers[{i}]") for i, m in enumerate(children)]
            if klass is ProductMapper:
                return ProductMapper(*parsed, delimiter=raw.get("delimiter", "|"), max_downstream_keys=cap)
            return ChainMapper(*parsed, max_downstream_keys=cap)
        upstream = mapper_from_manifest(raw.get("upstreamMapper"), f"{where}.upstreamMapper")
        window = window_from_manifest(raw.get("window"), f"{where}.window")
        if klass is RollupMapper:
            policy = wait_policy_from_manifest(
                raw.get("waitPolicy") or {"kind": "WaitForAll"}, f"{where}.waitPolicy"
            )
            return RollupMapper(
                upstream_mapper=upstream, window=window, wait_policy=policy, max_downstream_keys=cap
            )
        downstream = raw.get("downstreamMapper")
        return FanOutMapper(
            upstream_mapper=upstream,
            window=window,
            downstream_mapper=None
            if downstream is None
            else mapper_from_manifest(downstream, f"{where}.downstreamMapper"),
            max_downstream_keys=cap,
        )
    except PartitionSpecInvalid:
        raise
    except (TypeError, ValueError) as error:
        raise PartitionSpecInvalid(f"{where}: {error}") from error


__all__ = [
    "DEFAULT_MAX_DOWNSTREAM_KEYS",
    "AllowedKeyMapper",
    "ChainMapper",
    "DayWindow",
    "FanOutMapper",
    "FixedKeyMapper",
    "HourWindow",
    "IdentityMapper",
    "MinimumCount",
    "MonthWindow",
    "PartitionMapper",
    "PartitionSpecInvalid",
    "ProductMapper",
    "QuarterWindow",
    "RollupMapper",
    "SegmentWindow",
    "StartOfDayMapper",
    "StartOfHourMapper",
    "StartOfMonthMapper",
    "StartOfQuarterMapper",
    "StartOfWeekMapper",
    "StartOfYearMapper",
    "WaitForAll",
    "WaitPolicy",
    "WeekWindow",
    "Window",
    "YearWindow",
    "asset_partitions_from_manifest",
    "mapper_from_manifest",
    "wait_policy_from_manifest",
    "window_from_manifest",
]
