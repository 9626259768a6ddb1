"""Lease reasoning of the triggerer (`controller.triggerer.leases`): the fencing check, expiry by
observation, and the Lease wire format. Pure parts only; the cluster tier exercises the API calls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from controller.triggerer.leases import (
    Holding,
    LeaseObserver,
    LeaseRecord,
    holds,
    member_lease_name,
    shard_lease_name,
)
from zonda.resources.wire import format_micro_time

T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)


def record(
    holder: str | None = "me", transitions: int = 3, renewed: datetime = T0, duration: float = 15
) -> LeaseRecord:
    return LeaseRecord(
        name="zonda-triggerer-shard-1",
        holder=holder,
        duration_seconds=duration,
        transitions=transitions,
        acquire_time=T0,
        renew_time=renewed,
        resource_version="7",
    )


HOLDING = Holding(
    shard=1,
    lease_name="zonda-triggerer-shard-1",
    transitions=3,
    acquire_time=T0,
    resource_version="7",
    duration_seconds=15,
    renewed_at=100.0,
)


@pytest.mark.parametrize(
    ("lease", "now", "allowed"),
    [
        pytest.param(record(), 105.0, True, id="the holder with a fresh renewal may write"),
        pytest.param(record(holder="thief"), 105.0, False, id="a stolen lease forbids the write"),
        pytest.param(record(holder=None), 105.0, False, id="a released lease forbids the write"),
        pytest.param(
            record(transitions=5),
            105.0,
            False,
            id="a lease lost and won back since acquisition forbids the write (transitions moved)",
        ),
        pytest.param(record(), 115.0, False, id="a renewal older than the lease duration forbids the write"),
        pytest.param(None, 105.0, False, id="a deleted lease forbids the write"),
    ],
)
def test_fencing_check(lease: LeaseRecord | None, now: float, allowed: bool) -> None:
    assert holds(lease, HOLDING, "me", now) is allowed


def test_fencing_token_names_holder_and_transitions() -> None:
    assert HOLDING.fencing_token("me") == "me/3"


@pytest.mark.parametrize(
    ("observations", "now", "live"),
    [
        pytest.param([(0.0, 0)], 14.9, "other", id="a lease unchanged for less than its duration is live"),
        pytest.param([(0.0, 0)], 15.0, None, id="a lease unchanged for its whole duration has expired"),
        pytest.param([(0.0, 0), (5.0, 5)], 15.0, "other", id="a renewal seen meanwhile keeps it live"),
        pytest.param([(0.0, 0), (5.0, 0)], 15.0, None, id="seeing the same renewal again does not"),
    ],
)
def test_expiry_is_judged_by_our_own_observation(
    observations: list[tuple[float, int]], now: float, live: str | None
) -> None:
    observer = LeaseObserver()
    for seen_at, renewed_seconds in observations:
        latest = record(holder="other", renewed=T0 + timedelta(seconds=renewed_seconds))
        observer.observe(latest, seen_at)
    assert observer.live_holder(latest, now) == live


def test_expiry_ignores_the_renew_time_written_by_a_skewed_clock() -> None:
    observer = LeaseObserver()
    # Its holder's clock is an hour behind: by the wall clock it looks long expired, yet it is renewing.
    ancient = record(holder="other", renewed=T0 - timedelta(hours=1))
    observer.observe(ancient, 0.0)
    assert observer.live_holder(ancient, 1.0) == "other"


def test_a_released_lease_is_free_at_once() -> None:
    observer = LeaseObserver()
    released = record(holder=None)
    observer.observe(released, 0.0)
    assert observer.live_holder(released, 0.0) is None


def test_lease_record_reads_the_api_shape() -> None:
    body = {
        "metadata": {
            "name": "zonda-triggerer-shard-4",
            "resourceVersion": "99",
            "labels": {"zonda.dev/lease-kind": "shard", "zonda.dev/shard": "4"},
            "annotations": {"zonda.dev/capacity": "6"},
        },
        "spec": {
            "holderIdentity": "replica-a",
            "leaseDurationSeconds": 15,
            "leaseTransitions": 2,
            "acquireTime": "2024-03-01T12:00:00.000000+00:00",
            "renewTime": "2024-03-01T12:00:05.5+00:00",
        },
    }
    parsed = LeaseRecord.from_body(body)
    assert (parsed.holder, parsed.transitions, parsed.shard, parsed.capacity) == ("replica-a", 2, 4, 6)
    assert parsed.renew_time == T0 + timedelta(seconds=5.5)
    assert parsed.resource_version == "99"


def test_an_empty_holder_is_no_holder() -> None:
    parsed = LeaseRecord.from_body({"metadata": {"name": "x"}, "spec": {"holderIdentity": ""}})
    assert parsed.holder is None
    assert parsed.transitions == 0
    assert parsed.shard is None


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        pytest.param(T0, "2024-03-01T12:00:00.000000Z", id="whole seconds still get six fractional digits"),
        pytest.param(
            datetime(2024, 3, 1, 13, 0, 0, 12, tzinfo=timezone(timedelta(hours=1))),
            "2024-03-01T12:00:00.000012Z",
            id="other offsets are written in UTC",
        ),
    ],
)
def test_lease_times_are_kubernetes_micro_times(moment: datetime, text: str) -> None:
    assert format_micro_time(moment) == text


@pytest.mark.parametrize(
    ("identity", "name"),
    [
        pytest.param("triggerer-0", "zonda-triggerer-member-triggerer-0", id="a pod name is used as is"),
        pytest.param("Host.Example:42", "zonda-triggerer-member-host-example-42-", id="others are slugged"),
    ],
)
def test_member_lease_names_are_valid_object_names(identity: str, name: str) -> None:
    assert member_lease_name(identity).startswith(name)
    assert len(member_lease_name(identity)) <= 253


def test_shard_lease_name() -> None:
    assert shard_lease_name(7) == "zonda-triggerer-shard-7"
