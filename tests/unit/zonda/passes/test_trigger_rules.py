"""Airflow's trigger rules, case by case, as `TriggerRuleDep._evaluate_direct_relatives` decides them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zonda.passes.trigger_rules import TriggerRuleOutcome, UpstreamStates, evaluate_trigger_rule
from zonda.resources.models import TaskInstanceState, TriggerRule

S = TaskInstanceState
TR = TriggerRule
RUN, WAIT, SKIP, UF = (
    TriggerRuleOutcome.RUN,
    TriggerRuleOutcome.WAIT,
    TriggerRuleOutcome.SKIP,
    TriggerRuleOutcome.UPSTREAM_FAILED,
)


def upstreams(*states: TaskInstanceState) -> dict[str, TaskInstanceState]:
    return {f"up{i}": state for i, state in enumerate(states)}


CASES = [
    # all_success
    pytest.param(
        TR.ALL_SUCCESS,
        upstreams(S.SUCCESS, S.SUCCESS),
        RUN,
        id="all_success runs when every upstream succeeded",
    ),
    pytest.param(
        TR.ALL_SUCCESS, upstreams(S.SUCCESS, S.RUNNING), WAIT, id="all_success waits while an upstream runs"
    ),
    pytest.param(
        TR.ALL_SUCCESS,
        upstreams(S.FAILED, S.RUNNING),
        UF,
        id="all_success is upstream_failed as soon as one upstream fails",
    ),
    pytest.param(
        TR.ALL_SUCCESS,
        upstreams(S.UPSTREAM_FAILED, S.SUCCESS),
        UF,
        id="all_success propagates upstream_failed",
    ),
    pytest.param(
        TR.ALL_SUCCESS,
        upstreams(S.SKIPPED, S.RUNNING),
        SKIP,
        id="all_success is skipped as soon as one upstream is skipped",
    ),
    pytest.param(
        TR.ALL_SUCCESS,
        upstreams(S.SKIPPED, S.FAILED),
        UF,
        id="all_success prefers upstream_failed over skipped",
    ),
    pytest.param(
        TR.ALL_SUCCESS,
        upstreams(S.UP_FOR_RETRY),
        WAIT,
        id="all_success waits for an upstream that will be retried",
    ),
    # all_failed
    pytest.param(
        TR.ALL_FAILED,
        upstreams(S.FAILED, S.UPSTREAM_FAILED),
        RUN,
        id="all_failed runs when every upstream failed or is upstream_failed",
    ),
    pytest.param(
        TR.ALL_FAILED, upstreams(S.FAILED, S.RUNNING), WAIT, id="all_failed waits for the other upstreams"
    ),
    pytest.param(
        TR.ALL_FAILED,
        upstreams(S.FAILED, S.SUCCESS),
        SKIP,
        id="all_failed is skipped once an upstream succeeded",
    ),
    pytest.param(
        TR.ALL_FAILED,
        upstreams(S.SKIPPED, S.RUNNING),
        SKIP,
        id="all_failed is skipped once an upstream is skipped",
    ),
    # all_done
    pytest.param(
        TR.ALL_DONE,
        upstreams(S.SUCCESS, S.FAILED, S.SKIPPED, S.UPSTREAM_FAILED),
        RUN,
        id="all_done runs whatever the upstreams ended in",
    ),
    pytest.param(
        TR.ALL_DONE, upstreams(S.FAILED, S.DEFERRED), WAIT, id="all_done waits for a deferred upstream"
    ),
    pytest.param(
        TR.ALL_DONE_SETUP_SUCCESS,
        upstreams(S.SKIPPED, S.FAILED),
        RUN,
        id="all_done_setup_success without setup tasks behaves as all_done",
    ),
    pytest.param(
        TR.ALL_DONE_SETUP_SUCCESS,
        upstreams(S.SKIPPED, S.QUEUED),
        WAIT,
        id="all_done_setup_success waits for unfinished upstreams",
    ),
    # all_skipped
    pytest.param(
        TR.ALL_SKIPPED,
        upstreams(S.SKIPPED, S.SKIPPED),
        RUN,
        id="all_skipped runs when every upstream was skipped",
    ),
    pytest.param(
        TR.ALL_SKIPPED,
        upstreams(S.SKIPPED, S.SCHEDULED),
        WAIT,
        id="all_skipped waits for the other upstreams",
    ),
    pytest.param(
        TR.ALL_SKIPPED,
        upstreams(S.SKIPPED, S.SUCCESS),
        SKIP,
        id="all_skipped is skipped once an upstream succeeded",
    ),
    pytest.param(
        TR.ALL_SKIPPED,
        upstreams(S.UPSTREAM_FAILED, S.NONE),
        SKIP,
        id="all_skipped is skipped once an upstream is upstream_failed",
    ),
    # one_failed
    pytest.param(
        TR.ONE_FAILED,
        upstreams(S.FAILED, S.RUNNING, S.NONE),
        RUN,
        id="one_failed fires on the first failure without waiting for the others",
    ),
    pytest.param(
        TR.ONE_FAILED,
        upstreams(S.UPSTREAM_FAILED, S.RUNNING),
        RUN,
        id="one_failed counts upstream_failed as a failure",
    ),
    pytest.param(
        TR.ONE_FAILED,
        upstreams(S.SUCCESS, S.RUNNING),
        WAIT,
        id="one_failed waits while a failure is still possible",
    ),
    pytest.param(
        TR.ONE_FAILED,
        upstreams(S.SUCCESS, S.SKIPPED),
        SKIP,
        id="one_failed is skipped when everything finished without failure",
    ),
    # one_success
    pytest.param(
        TR.ONE_SUCCESS,
        upstreams(S.SUCCESS, S.RUNNING, S.NONE),
        RUN,
        id="one_success fires on the first success without waiting for the others",
    ),
    pytest.param(
        TR.ONE_SUCCESS,
        upstreams(S.FAILED, S.RUNNING),
        WAIT,
        id="one_success waits while a success is still possible",
    ),
    pytest.param(
        TR.ONE_SUCCESS,
        upstreams(S.FAILED, S.SKIPPED),
        UF,
        id="one_success is upstream_failed when everything finished without success",
    ),
    pytest.param(
        TR.ONE_SUCCESS,
        upstreams(S.SKIPPED, S.SKIPPED),
        SKIP,
        id="one_success is skipped when every upstream was skipped",
    ),
    # one_done
    pytest.param(TR.ONE_DONE, upstreams(S.FAILED, S.RUNNING), RUN, id="one_done fires on a failure"),
    pytest.param(TR.ONE_DONE, upstreams(S.SUCCESS, S.NONE), RUN, id="one_done fires on a success"),
    pytest.param(
        TR.ONE_DONE,
        upstreams(S.SKIPPED, S.RUNNING),
        WAIT,
        id="one_done does not count a skip as done and waits",
    ),
    pytest.param(
        TR.ONE_DONE,
        upstreams(S.SKIPPED, S.UPSTREAM_FAILED),
        SKIP,
        id="one_done is skipped when nothing succeeded or failed",
    ),
    # none_failed
    pytest.param(
        TR.NONE_FAILED, upstreams(S.SUCCESS, S.SKIPPED), RUN, id="none_failed runs after successes and skips"
    ),
    pytest.param(
        TR.NONE_FAILED,
        upstreams(S.SKIPPED, S.SKIPPED),
        RUN,
        id="none_failed runs even when every upstream was skipped",
    ),
    pytest.param(
        TR.NONE_FAILED, upstreams(S.SUCCESS, S.RUNNING), WAIT, id="none_failed waits for the other upstreams"
    ),
    pytest.param(
        TR.NONE_FAILED,
        upstreams(S.FAILED, S.RUNNING),
        UF,
        id="none_failed is upstream_failed as soon as one upstream fails",
    ),
    # none_failed_min_one_success
    pytest.param(
        TR.NONE_FAILED_MIN_ONE_SUCCESS,
        upstreams(S.SUCCESS, S.SKIPPED),
        RUN,
        id="none_failed_min_one_success runs after a success and skips",
    ),
    pytest.param(
        TR.NONE_FAILED_MIN_ONE_SUCCESS,
        upstreams(S.SKIPPED, S.SKIPPED),
        SKIP,
        id="none_failed_min_one_success is skipped when every upstream was skipped",
    ),
    pytest.param(
        TR.NONE_FAILED_MIN_ONE_SUCCESS,
        upstreams(S.SKIPPED, S.RUNNING),
        WAIT,
        id="none_failed_min_one_success waits while a success is still possible",
    ),
    pytest.param(
        TR.NONE_FAILED_MIN_ONE_SUCCESS,
        upstreams(S.SUCCESS, S.UPSTREAM_FAILED),
        UF,
        id="none_failed_min_one_success is upstream_failed after an upstream failure",
    ),
    # none_skipped
    pytest.param(
        TR.NONE_SKIPPED,
        upstreams(S.SUCCESS, S.FAILED, S.UPSTREAM_FAILED),
        RUN,
        id="none_skipped runs when nothing was skipped, even after failures",
    ),
    pytest.param(
        TR.NONE_SKIPPED,
        upstreams(S.SUCCESS, S.RUNNING),
        WAIT,
        id="none_skipped waits for the other upstreams",
    ),
    pytest.param(
        TR.NONE_SKIPPED,
        upstreams(S.SKIPPED, S.RUNNING),
        SKIP,
        id="none_skipped is skipped as soon as one upstream is skipped",
    ),
    # always, and no upstream at all
    pytest.param(TR.ALWAYS, upstreams(S.NONE, S.RUNNING), RUN, id="always runs without waiting for anything"),
    pytest.param(TR.ALL_SUCCESS, {}, RUN, id="a task without upstream tasks runs"),
    pytest.param(TR.ALL_FAILED, {}, RUN, id="a root task runs whatever its trigger rule"),
]


@pytest.mark.parametrize(("rule", "states", "expected"), CASES)
def test_trigger_rule_outcome(
    rule: TriggerRule, states: dict[str, TaskInstanceState], expected: TriggerRuleOutcome
) -> None:
    assert evaluate_trigger_rule(rule, states).outcome is expected


# Why a task instance waits or settles. The sentence is Airflow 2.10's, word for word: the f-strings of
# `TriggerRuleDep._evaluate_direct_relatives` (airflow/ti_deps/deps/trigger_rule_dep.py, v2.10.x), so
# an Airflow user searching "requires all upstream tasks to have succeeded" finds what they know.
# The ` upstream_states=..., upstream_task_ids=...` suffix is Zonda's own wording: Airflow prints the
# repr of its private NamedTuple `_UpstreamTIStates(success=1, skipped=1, failed=0,
# upstream_failed=0, removed=0, done=2, success_setup=0, skipped_setup=0)` and `task.upstream_task_ids`
# as an unordered set; Zonda prints `UpstreamStates(...)` without the setup counts, the ids sorted (a
# stable message, so a status write or Event is not repeated for a reordered set) and a mapped
# upstream's instances folded into one `'task' (N mapped)`. Exact equality with Airflow's line is not
# reachable anyway (its set order changes from process to process), and a private class name is
# nothing a user looks for; the sentence is.
AIRFLOW_SENTENCES = [
    pytest.param(
        TR.ALL_SUCCESS,
        {"extract": S.SUCCESS, "load": S.SKIPPED},
        "Task's trigger rule 'all_success' requires all upstream tasks to have succeeded, but found 1 "
        "non-success(es).",
        "UpstreamStates(success=1, skipped=1, failed=0, upstream_failed=0, removed=0, done=2), "
        "upstream_task_ids={'extract', 'load'}",
        id="an all_success skip says how many upstreams did not succeed",
    ),
    pytest.param(
        TR.ONE_FAILED,
        {"a": S.SUCCESS, "b": S.RUNNING},
        "Task's trigger rule 'one_failed' requires one upstream task failure, but none were found.",
        "UpstreamStates(success=1, skipped=0, failed=0, upstream_failed=0, removed=0, done=1), "
        "upstream_task_ids={'a', 'b'}",
        id="a waiting one_failed says no failure was found",
    ),
    pytest.param(
        TR.ALL_DONE,
        {"a": S.SUCCESS, "b": S.RUNNING, "c": S.QUEUED},
        "Task's trigger rule 'all_done' requires all upstream tasks to have completed, but found 2 "
        "task(s) that were not done.",
        "UpstreamStates(success=1, skipped=0, failed=0, upstream_failed=0, removed=0, done=1), "
        "upstream_task_ids={'a', 'b', 'c'}",
        id="a waiting all_done counts the unfinished upstreams",
    ),
]


@pytest.mark.parametrize(("rule", "states", "sentence", "zonda_suffix"), AIRFLOW_SENTENCES)
def test_a_reason_is_airflows_sentence_then_zondas_counts(
    rule: TriggerRule, states: dict[str, TaskInstanceState], sentence: str, zonda_suffix: str
) -> None:
    assert evaluate_trigger_rule(rule, states).reason == f"{sentence} upstream_states={zonda_suffix}"


@pytest.mark.parametrize(
    ("rule", "states", "reason"),
    [
        pytest.param(TR.ALWAYS, {"a": S.NONE}, "The task had a always trigger rule set.", id="always"),
        pytest.param(
            TR.ALL_SUCCESS, {}, "The task instance did not have any upstream tasks.", id="a root task"
        ),
    ],
)
def test_a_passing_reason_without_counts_is_airflows_whole(
    rule: TriggerRule, states: dict[str, TaskInstanceState], reason: str
) -> None:
    """`TriggerRuleDep._get_dep_statuses`'s two passing reasons, Airflow's text entire."""
    assert evaluate_trigger_rule(rule, states).reason == reason


def test_every_upstream_skipped_under_none_failed_min_one_success_is_zondas_sentence() -> None:
    """Airflow skips this task instance without a failing status (its requirement check passes:
    0 non-successes), so it has no sentence to copy; Zonda says why in its own words."""
    reason = evaluate_trigger_rule(TR.NONE_FAILED_MIN_ONE_SUCCESS, {"a": S.SKIPPED, "b": S.SKIPPED}).reason
    assert reason == (
        "Task's trigger rule 'none_failed_min_one_success' requires at least one upstream task success, "
        "but all 2 upstream task(s) were skipped. upstream_states=UpstreamStates(success=0, skipped=2, "
        "failed=0, upstream_failed=0, removed=0, done=2), upstream_task_ids={'a', 'b'}"
    )


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        pytest.param(
            {"a": S.SUCCESS, "b": S.FAILED, "c": S.RUNNING},
            UpstreamStates(success=1, failed=1, done=2),
            id="unfinished upstreams are not counted",
        ),
        pytest.param(
            {"a": S.REMOVED, "b": S.UPSTREAM_FAILED, "c": S.SKIPPED},
            UpstreamStates(skipped=1, upstream_failed=1, removed=1, done=3),
            id="removed upstreams are done",
        ),
    ],
)
def test_upstream_states_count_finished_states(
    states: dict[str, TaskInstanceState], expected: UpstreamStates
) -> None:
    assert UpstreamStates.count(states) == expected


@given(
    rule=st.sampled_from(TriggerRule),
    states=st.dictionaries(
        st.text("abcdef", min_size=1, max_size=4), st.sampled_from(TaskInstanceState), max_size=6
    ),
    data=st.data(),
)
def test_decision_does_not_depend_on_upstream_order(
    rule: TriggerRule, states: dict[str, TaskInstanceState], data: st.DataObject
) -> None:
    shuffled = dict(data.draw(st.permutations(list(states.items()))))
    assert evaluate_trigger_rule(rule, shuffled) == evaluate_trigger_rule(rule, states)


@given(
    rule=st.sampled_from(TriggerRule),
    states=st.lists(
        st.sampled_from([S.SUCCESS, S.FAILED, S.SKIPPED, S.UPSTREAM_FAILED]), min_size=1, max_size=6
    ),
)
def test_no_rule_waits_once_every_upstream_finished(
    rule: TriggerRule, states: list[TaskInstanceState]
) -> None:
    """Once every upstream is done a rule runs or settles: no run deadlocks on its trigger rules."""
    assert evaluate_trigger_rule(rule, upstreams(*states)).outcome is not WAIT
