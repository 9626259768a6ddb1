"""Return values that are not JSON, for the run fuzzer's XCom cases (`test_fuzz_runs.NOT_JSON`)."""

from __future__ import annotations

from typing import Any


def a_set() -> frozenset[int]:
    return frozenset({1, 2})


def nan() -> float:
    return float("nan")


def some_bytes() -> bytes:
    return b"\xff\xfe"


def int_keys() -> dict[Any, str]:
    return {1: "one"}


def json_ok() -> dict[str, int]:
    return {"a": 1}
