"""Airflow's trigger rules: may a task instance run, given its direct upstreams' states?

This is Airflow 2.x's `TriggerRuleDep._evaluate_direct_relatives` with `flag_upstream_failed=True`
(how the scheduler evaluates it), without mapped tasks and setup/teardown tasks, which Zonda does
not have: only *finished* upstreams are counted, a rule may fire before every upstream is done
(``one_success``, ``one_failed``, ``one_done``), and a rule that can no longer be met settles the task
instance as ``skipped`` or ``upstream_failed`` so the cascade continues downstream. The reasons are
Airflow's sentences, so an Airflow user reading "why didn't my task run" finds the familiar text.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from zonda.resources.models import FINISHED_TI_STATES, TaskInstanceState, TriggerRule

S = TaskInstanceState
TR = TriggerRule


class TriggerRuleOutcome(enum.StrEnum):
    RUN = "run"  # the rule is met: the task instance may be scheduled
    WAIT = "wait"  # not met yet, but it still may be
    SKIP = "skip"  # can never be met because of skipped upstreams: the task instance is skipped
    UPSTREAM_FAILED = "upstream_failed"  # can never be met because of failed upstreams


@dataclass(frozen=True)
class UpstreamStates:
    """How many direct upstream task instances finished in each state (Airflow's `_UpstreamTIStates`)."""

    success: int = 0
    skipped: int = 0
    failed: int = 0
    upstream_failed: int = 0
    removed: int = 0
    done: int = 0

    @classmethod
    def count(cls, states: Mapping[str, TaskInstanceState]) -> UpstreamStates:
        """Count the finished states only, as Airflow counts its `finished_tis`."""
        counter = Counter(state for state in states.values() if state in FINISHED_TI_STATES)
        return cls(
            success=counter[S.SUCCESS],
            skipped=counter[S.SKIPPED],
            failed=counter[S.FAILED],
            upstream_failed=counter[S.UPSTREAM_FAILED],
            removed=counter[S.REMOVED],
            done=sum(counter.values()),
        )

    def __str__(self) -> str:
        return (
            f"UpstreamStates(success={self.success}, skipped={self.skipped}, failed={self.failed}, "
            f"upstream_failed={self.upstream_failed}, removed={self.removed}, done={self.done})"
        )


@dataclass(frozen=True)
class TriggerRuleDecision:
    outcome: TriggerRuleOutcome
    reason: str
    upstream_states: UpstreamStates


def _format_ids(task_ids: Mapping[str, object]) -> str:
    """Upstream ids as Airflow prints its set, but sorted so the sentence is stable; a mapped upstream's
    instances (``task[i]`` keys) once, with their count, so 1,024 instances stay one short sentence."""
    mapped = Counter(key.rpartition("[")[0] for key in task_ids if key.endswith("]") and "[" in key)
    names = [repr(key) for key in task_ids if key.rpartition("[")[0] not in mapped] + [
        f"{task_id!r} ({count} mapped)" for task_id, count in mapped.items()
    ]
    return "{" + ", ".join(sorted(names)) + "}"


def evaluate_trigger_rule(
    rule: TriggerRule, upstream_states: Mapping[str, TaskInstanceState], setup_upstream: Collection[str] = ()
) -> TriggerRuleDecision:
    """Decide whether a task instance with `rule` may run, given its direct upstreams' states.

    `upstream_states` maps every direct upstream task id to its task instance's current state
    (unfinished ones included: they count as "not done"). `setup_upstream` names the direct upstreams
    that are setup tasks (for `all_done_setup_success`).
    """
    counts = UpstreamStates.count(upstream_states)
    setup_decision = None
    if rule is TR.ALL_DONE_SETUP_SUCCESS and setup_upstream and counts.done >= len(upstream_states):
        setup_decision = _setup_outcome(rule, upstream_states, setup_upstream, counts)
    if setup_decision is not None:
        return setup_decision
    if not upstream_states:
        return TriggerRuleDecision(
            TriggerRuleOutcome.RUN, "The task instance did not have any upstream tasks.", counts
        )
    if rule is TR.ALWAYS:
        return TriggerRuleDecision(TriggerRuleOutcome.RUN, "The task had a always trigger rule set.", counts)

    settled = _settled_outcome(rule, counts, upstream=len(upstream_states))
    unmet = _unmet_reason(rule, counts, upstream=len(upstream_states))
    suffix = f" upstream_states={counts}, upstream_task_ids={_format_ids(upstream_states)}"
    if settled is not None:
        # Airflow sets the state and also reports the unmet requirement; a few settled cases (all
        # upstreams skipped for none_failed_min_one_success...) pass the requirement check, so they
        # get a sentence of their own.
        reason = unmet or _settled_reason(rule, counts)
        return TriggerRuleDecision(settled, reason + suffix, counts)
    if unmet is not None:
        return TriggerRuleDecision(TriggerRuleOutcome.WAIT, unmet + suffix, counts)
    return TriggerRuleDecision(
        TriggerRuleOutcome.RUN, f"Task's trigger rule '{rule.value}' was met." + suffix, counts
    )


def _setup_outcome(
    rule: TriggerRule,
    upstream_states: Mapping[str, TaskInstanceState],
    setup_upstream: Collection[str],
    counts: UpstreamStates,
) -> TriggerRuleDecision | None:
    """Airflow's all_done_setup_success once every upstream is done: skip when every setup was skipped,
    upstream_failed when none succeeded, else None (run)."""
    setups = [upstream_states[task_id] for task_id in setup_upstream if task_id in upstream_states]
    succeeded = sum(state is TaskInstanceState.SUCCESS for state in setups)
    skipped = sum(state is TaskInstanceState.SKIPPED for state in setups)
    prefix = f"Task's trigger rule '{rule.value}'"
    if setups and skipped >= len(setups):
        return TriggerRuleDecision(
            TriggerRuleOutcome.SKIP, f"{prefix}: every upstream setup task was skipped.", counts
        )
    if setups and not succeeded:
        return TriggerRuleDecision(
            TriggerRuleOutcome.UPSTREAM_FAILED,
            f"{prefix} requires at least one upstream setup task be successful, but found "
            f"{len(setups)} task(s) that were not.",
            counts,
        )
    return None


def _settled_outcome(
    rule: TriggerRule, counts: UpstreamStates, *, upstream: int
) -> TriggerRuleOutcome | None:
    """Airflow's `flag_upstream_failed` branch: the rule can never be met, settle the task instance."""
    success, skipped, failed = counts.success, counts.skipped, counts.failed
    upstream_failed, done = counts.upstream_failed, counts.done
    upstream_done = done >= upstream
    skip, fail = TriggerRuleOutcome.SKIP, TriggerRuleOutcome.UPSTREAM_FAILED
    if rule is TR.ALL_SUCCESS:
        if upstream_failed or failed:
            return fail
        if skipped:
            return skip
    elif rule is TR.ALL_FAILED:
        if success or skipped:
            return skip
    elif rule is TR.ONE_SUCCESS:
        if upstream_done and done == skipped:
            return skip
        if upstream_done and success <= 0:
            return fail
    elif rule is TR.ONE_FAILED:
        if upstream_done and not (failed or upstream_failed):
            return skip
    elif rule is TR.ONE_DONE:
        if upstream_done and not (failed or success):
            return skip
    elif rule is TR.NONE_FAILED:
        if upstream_failed or failed:
            return fail
    elif rule is TR.NONE_FAILED_MIN_ONE_SUCCESS:
        if upstream_failed or failed:
            return fail
        if skipped == upstream:
            return skip
    elif rule is TR.NONE_SKIPPED:
        if skipped:
            return skip
    elif rule is TR.ALL_SKIPPED and (success or failed or upstream_failed):
        return skip
    # all_done and all_done_setup_success never settle here: they wait (setups: _setup_outcome).
    return None


def _unmet_reason(rule: TriggerRule, counts: UpstreamStates, *, upstream: int) -> str | None:
    """Airflow's requirement check: why the rule is not met (yet), or None when it is met."""
    success, skipped, failed = counts.success, counts.skipped, counts.failed
    upstream_failed, done = counts.upstream_failed, counts.done
    prefix = f"Task's trigger rule '{rule.value}'"
    if rule is TR.ONE_SUCCESS:
        if success <= 0:
            return f"{prefix} requires one upstream task success, but none were found."
    elif rule is TR.ONE_FAILED:
        if not failed and not upstream_failed:
            return f"{prefix} requires one upstream task failure, but none were found."
    elif rule is TR.ONE_DONE:
        if success + failed <= 0:
            return (
                f"{prefix} requires at least one upstream task failure or success "
                "but none were failed or success."
            )
    elif rule is TR.ALL_SUCCESS:
        if (num_failures := upstream - success) > 0:
            return (
                f"{prefix} requires all upstream tasks to have succeeded, "
                f"but found {num_failures} non-success(es)."
            )
    elif rule is TR.ALL_FAILED:
        if (num_success := upstream - failed - upstream_failed) > 0:
            return (
                f"{prefix} requires all upstream tasks to have failed, "
                f"but found {num_success} non-failure(s)."
            )
    elif rule in (TR.ALL_DONE, TR.ALL_DONE_SETUP_SUCCESS):
        if done < upstream:
            return (
                f"{prefix} requires all upstream tasks to have completed, "
                f"but found {upstream - done} task(s) that were not done."
            )
    elif rule in (TR.NONE_FAILED, TR.NONE_FAILED_MIN_ONE_SUCCESS):
        if (num_failures := upstream - success - skipped) > 0:
            return (
                f"{prefix} requires all upstream tasks to have succeeded or been skipped, "
                f"but found {num_failures} non-success(es)."
            )
    elif rule is TR.NONE_SKIPPED:
        if done < upstream or skipped > 0:
            return (
                f"{prefix} requires all upstream tasks to not have been skipped, "
                f"but found {skipped} task(s) skipped."
            )
    elif rule is TR.ALL_SKIPPED and (num_non_skipped := upstream - skipped) > 0:
        return (
            f"{prefix} requires all upstream tasks to have been skipped, "
            f"but found {num_non_skipped} task(s) in non skipped state."
        )
    return None


def _settled_reason(rule: TriggerRule, counts: UpstreamStates) -> str:
    """The sentence for a settled task instance whose requirement check alone would have passed."""
    prefix = f"Task's trigger rule '{rule.value}'"
    if rule is TR.NONE_FAILED_MIN_ONE_SUCCESS:
        return (
            f"{prefix} requires at least one upstream task success, "
            f"but all {counts.skipped} upstream task(s) were skipped."
        )
    return f"{prefix} can no longer be met."  # pragma: no cover - every other settled case is unmet


__all__ = ["TriggerRuleDecision", "TriggerRuleOutcome", "UpstreamStates", "evaluate_trigger_rule"]
