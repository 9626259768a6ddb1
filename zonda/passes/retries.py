"""When a failed task instance is tried again: Airflow's `TaskInstance.next_retry_datetime`, exactly.

With exponential backoff the delay of the retry numbered ``n`` (the try about to run; Airflow 2.x
before 2.10 counted it so) is ``min_backoff = ceil(retry_delay * 2 ** (n - 2))`` seconds (at least 1)
plus a jitter in ``[0, min_backoff)`` drawn from a SHA-1 of ``dag_id#task_id#logical_date#n`` — stable
across processes, unlike Python's `hash` — capped by Airflow's `max_task_retry_delay` (24h) and by the
task's `max_retry_delay`. Without backoff the delay is `retry_delay`, as in Airflow.
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timedelta

#: Airflow's `[core] max_task_retry_delay` default: no backoff delay exceeds a day.
MAX_RETRY_DELAY = timedelta(hours=24)


def retry_delay_for(
    *,
    dag_id: str,
    task_id: str,
    logical_date: datetime | str,
    next_try_number: int,
    retry_delay: timedelta,
    exponential_backoff: bool = False,
    max_retry_delay: timedelta | None = None,
) -> timedelta:
    """How long a task instance waits before try `next_try_number` (2 for the first retry)."""
    if not exponential_backoff:
        return retry_delay
    min_backoff = max(1, math.ceil(retry_delay.total_seconds() * (2 ** (next_try_number - 2))))
    date_text = logical_date.isoformat() if isinstance(logical_date, datetime) else logical_date
    seed = f"{dag_id}#{task_id}#{date_text}#{next_try_number}".encode()
    ti_hash = int(hashlib.sha1(seed, usedforsecurity=False).hexdigest(), 16)
    modded_hash = min_backoff + ti_hash % min_backoff
    delay = timedelta(seconds=min(modded_hash, MAX_RETRY_DELAY.total_seconds()))
    return min(max_retry_delay, delay) if max_retry_delay else delay


def next_retry_datetime(
    *,
    failed_at: datetime,
    dag_id: str,
    task_id: str,
    logical_date: datetime | str,
    next_try_number: int,
    retry_delay: timedelta,
    exponential_backoff: bool = False,
    max_retry_delay: timedelta | None = None,
) -> datetime:
    """When try `next_try_number` may start, counted from the end of the failed try (Airflow's end_date)."""
    return failed_at + retry_delay_for(
        dag_id=dag_id,
        task_id=task_id,
        logical_date=logical_date,
        next_try_number=next_try_number,
        retry_delay=retry_delay,
        exponential_backoff=exponential_backoff,
        max_retry_delay=max_retry_delay,
    )


def is_eligible_to_retry(*, try_number: int, max_tries: int) -> bool:
    """Airflow's `is_eligible_to_retry`: try `try_number` failed and `max_tries` retries are allowed."""
    return max_tries > 0 and try_number <= max_tries


__all__ = ["MAX_RETRY_DELAY", "is_eligible_to_retry", "next_retry_datetime", "retry_delay_for"]
