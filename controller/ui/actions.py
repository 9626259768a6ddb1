"""The actions: trigger, pause/unpause, clear (with a preview), mark success/failed.

Each is carried out with an API client that authenticates as the viewer (`Access.acting_as`), so the
Kubernetes API itself grants or refuses it; a refusal comes back to the page as the API's message
with its status (403), and nothing has changed. Read-only mode refuses before calling the API.
The middleware has already checked the CSRF token, the Origin and the JSON content type.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web

from controller.kube import DAGRUNS, DAGS, Kube, KubeError
from controller.operations import hitl_responses, run_actions
from controller.ui import params_form
from controller.ui.access import Viewer
from controller.ui.app_state import ACCESS, SETTINGS, STORE, VIEWER, require
from zonda.actions import across_dags
from zonda.actions import clear_and_mark as zonda_actions
from zonda.actions.clear_and_mark import ActionResult
from zonda.resources.dagrun_models import DagRunStatus, TaskInstanceStatus
from zonda.resources.models import TaskInstanceState
from zonda.schedules import manual_runs
from zonda.specs.dags import ResolvedDag

T = TypeVar("T")
ActionOutcome = tuple[ActionResult, dict[str, TaskInstanceStatus]]


def _api_message(exc: KubeError) -> str:
    """The API's own sentence (`Status.message`) rather than the whole JSON body."""
    try:
        return str(json.loads(exc.reason).get("message") or exc.reason)
    except (ValueError, AttributeError):
        return exc.reason


async def as_viewer(request: web.Request, action: Callable[[Kube], Awaitable[T]]) -> T:
    """Run `action` with the viewer's identity; API errors become the page's answer."""
    if request.app[SETTINGS].read_only:
        raise ActionRefused(403, "This Zonda UI is read-only: actions are turned off.")
    access = request.app[ACCESS]
    kube = access.acting_as(request[VIEWER])
    try:
        return await action(kube)
    except KubeError as exc:
        raise ActionRefused(exc.status or 502, _api_message(exc)) from exc
    finally:
        if kube is not access.kube:
            await kube.close()


class ActionRefused(web.HTTPError):
    """An action not done, with the reason as JSON `{"error": ...}` and the API's status (403, 409...)."""

    status_code = 400

    def __init__(self, status: int, message: str) -> None:
        super().__init__(text=json.dumps({"error": message}), content_type="application/json")
        self.set_status(status if 400 <= status < 600 else 502)


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as exc:
        raise ActionRefused(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ActionRefused(400, "the body must be a JSON object")
    return body


# ---------------------------------------------------------------------------------------- trigger


async def trigger(request: web.Request) -> web.Response:
    """Create a manual DagRun with `conf` (checked against the DAG's params first), as the viewer."""
    namespace, name = request.match_info["namespace"], request.match_info["dag"]
    await require(request, "get", "dags", namespace)
    body = await _json_body(request)
    conf = body.get("conf", {})
    if not isinstance(conf, dict):
        raise ActionRefused(400, "conf must be a JSON object")
    dag = request.app[STORE].dags.get((namespace, name))
    if dag is None:
        raise ActionRefused(404, f"DAG {name} not found in namespace {namespace}")
    errors = params_form.conf_errors(dag.get("spec") or {}, conf)
    if errors:
        raise ActionRefused(422, "conf does not match the DAG's params: " + "; ".join(errors))
    logical_date = _logical_date(body.get("logicalDate"))
    run = manual_runs.manual_run(
        name, dag.get("spec") or {}, namespace, logical_date=logical_date, conf=conf, now=datetime.now(UTC)
    )
    await as_viewer(request, lambda kube: kube.create_custom(DAGRUNS, namespace, run.body))
    return web.json_response({"run": run.name, "url": f"/runs/{namespace}/{run.name}"}, status=201)


def _logical_date(value: Any) -> datetime | None:
    """The trigger's optional `logicalDate` (ISO 8601 with a timezone); none: now, or none at all for an
    Airflow 3 DAG (`zonda.schedules.manual_runs`)."""
    if value in (None, ""):
        return None
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise ActionRefused(400, f"logicalDate: {exc}") from exc
    if moment.tzinfo is None:
        raise ActionRefused(400, "logicalDate needs a timezone, e.g. 2026-01-01T00:00:00+00:00")
    return moment


async def set_paused(request: web.Request) -> web.Response:
    """Pause or unpause: `spec.paused`, as `kubectl patch` would set it (GitOps may set it back)."""
    namespace, name = request.match_info["namespace"], request.match_info["dag"]
    body = await _json_body(request)
    paused = body.get("paused")
    if not isinstance(paused, bool):
        raise ActionRefused(400, "paused must be true or false")
    await as_viewer(
        request, lambda kube: kube.patch_custom(DAGS, namespace, name, {"spec": {"paused": paused}})
    )
    return web.json_response({"paused": paused})


# ----------------------------------------------------------------------------------- clear, mark


async def act_on_run(kube: Kube, namespace: str, run_name: str, act: run_actions.Action) -> ActionOutcome:
    try:
        return await run_actions.act_on_run(kube, namespace, run_name, act, component="zonda-ui")
    except run_actions.RunActionError as exc:
        raise ActionRefused(exc.status, exc.message) from exc


def _who(viewer: Viewer) -> str:
    """How the run's Events name the actor (the API's audit log has the authenticated identity)."""
    return f"{viewer.user} (Zonda UI)" if viewer.user else "a user (Zonda UI)"


def _task_ids(body: dict[str, Any]) -> list[str] | None:
    tasks = body.get("tasks")
    if tasks is None:
        return None
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise ActionRefused(400, "tasks must be a list of task ids")
    return tasks


async def clear(request: web.Request) -> web.Response:
    """Clear task instances (with upstream/downstream/only_failed); `dry_run` answers what would be cleared.

    The preview reads the run as the viewer and changes nothing, so it needs only read access.
    """
    namespace, run_name = request.match_info["namespace"], request.match_info["run"]
    body = await _json_body(request)
    task_ids = _task_ids(body)
    flags = {name: bool(body.get(name)) for name in ("upstream", "downstream", "only_failed")}
    who = _who(request[VIEWER])

    def act(dag: ResolvedDag, status: DagRunStatus) -> ActionResult:
        return zonda_actions.clear(dag, status, task_ids=task_ids, now=datetime.now(UTC), who=who, **flags)

    if body.get("dry_run"):
        await require(request, "get", "dagruns", namespace)
        run = request.app[STORE].runs.get((namespace, run_name))
        if run is None:
            raise ActionRefused(404, f"DagRun {run_name} not found in namespace {namespace}")
        try:
            result, _ = run_actions.apply_action(run, act)
        except run_actions.RunActionError as exc:
            raise ActionRefused(exc.status, exc.message) from exc
        return web.json_response({"tasks": list(result.changed), "dry_run": True})
    first = across_dags.RunClear(
        run_name,
        tuple(task_ids) if task_ids is not None else None,
        upstream=flags["upstream"],
        downstream=flags["downstream"],
        only_failed=flags["only_failed"],
    )

    async def clear_as_viewer(kube: Kube) -> list[run_actions.RunOutcome]:
        try:
            return await run_actions.clear_across_dags(
                kube, namespace, first, now=datetime.now(UTC), who=who, component="zonda-ui"
            )
        except run_actions.RunActionError as exc:
            raise ActionRefused(exc.status, exc.message) from exc

    own, *external = await as_viewer(request, clear_as_viewer)
    return web.json_response(
        {
            "tasks": list(own.result.changed),
            "changes": zonda_actions.describe(own.result, own.before),
            # Runs of other DAGs cleared through ExternalTaskMarkers, as Airflow's recursive clear.
            "external": [
                {"run": o.run_name, "via": o.via, "changes": zonda_actions.describe(o.result, o.before)}
                for o in external
            ],
        }
    )


async def mark(request: web.Request) -> web.Response:
    """Mark task instances success/failed/skipped (failed ones downstream are cleared, as in Airflow)."""
    namespace, run_name = request.match_info["namespace"], request.match_info["run"]
    body = await _json_body(request)
    task_ids = _task_ids(body) or ([body["task"]] if isinstance(body.get("task"), str) else None)
    if not task_ids:
        raise ActionRefused(400, "name the task to mark (task)")
    try:
        state = TaskInstanceState(str(body.get("state")))
    except ValueError as exc:
        raise ActionRefused(400, f"not a task state: {body.get('state')!r}") from exc
    who = _who(request[VIEWER])

    def act(dag: ResolvedDag, status: DagRunStatus) -> ActionResult:
        return zonda_actions.mark(dag, status, task_ids=task_ids, state=state, now=datetime.now(UTC), who=who)

    result, before = await as_viewer(request, lambda kube: act_on_run(kube, namespace, run_name, act))
    return web.json_response(
        {"tasks": list(result.changed), "changes": zonda_actions.describe(result, before)}
    )


# ------------------------------------------------------------------------------- human in the loop


async def respond(request: web.Request) -> web.Response:
    """Answer a human-in-the-loop task (`{"options": [...], "params": {...}}`), as the viewer: RBAC's
    `triggers/status` patch decides who may (`controller.operations.hitl_responses`)."""
    namespace, run_name, key = (request.match_info[k] for k in ("namespace", "run", "task"))
    body = await _json_body(request)
    options, params = body.get("options"), body.get("params") or {}
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ActionRefused(400, "options must be a list of the chosen options")
    if not isinstance(params, dict):
        raise ActionRefused(400, "params must be a JSON object")
    viewer = request[VIEWER]

    async def answer(kube: Kube) -> hitl_responses.Answered:
        user = viewer.user or await kube.whoami()
        try:
            return await hitl_responses.respond(
                kube, namespace, run_name, key, options=options, params_input=params, user=user,
                now=datetime.now(UTC),
            )  # fmt: skip
        except hitl_responses.RespondError as exc:
            raise ActionRefused(409, str(exc)) from exc

    answered = await as_viewer(request, answer)
    return web.json_response({"trigger": answered.trigger, "chosen": answered.event["chosen_options"]})


def add_routes(app: web.Application) -> None:
    app.router.add_post("/api/runs/{namespace}/{run}/tasks/{task}/respond", respond)
    app.router.add_post("/api/runs/{namespace}/{run}/clear", clear)
    app.router.add_post("/api/runs/{namespace}/{run}/mark", mark)
    app.router.add_post("/api/dags/{namespace}/{dag}/trigger", trigger)
    app.router.add_post("/api/dags/{namespace}/{dag}/paused", set_paused)
