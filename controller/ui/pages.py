"""The pages: DAG list, grid, graph, trigger form, run, task instance (and a try's log).

Each handler checks what the viewer may read (RBAC, through `Access`), gathers bodies from the store
(or the API for Events, pods and logs), turns them into view models (`views`, pure) and renders a
Jinja template with autoescaping on: user text (names, conf, logs, messages) is always escaped, and
`doc_md` passes through the Markdown sanitiser (`markup`) before it is marked safe.
"""

from __future__ import annotations

import functools
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import jinja2
from aiohttp import web
from markupsafe import Markup

from controller.kube import KubeError
from controller.operations import try_logs as task_logs
from controller.ui import graphs, log_stream, params_form, tries, views
from controller.ui.app_state import KUBE, SETTINGS, STATIC_DIR, STORE, TEMPLATES, VIEWER, csrf_token, require
from controller.ui.markup import render_markdown
from zonda.resources import hitl
from zonda.tries.rendered_fields import RenderedField, RenderingUnavailable, render_task_fields

PAGE_SIZE = 100


@functools.cache
def _static_url(name: str) -> str:
    """A static file's URL with its content hash, so browsers never run a stale app.js."""
    digest = hashlib.sha256((STATIC_DIR / name).read_bytes()).hexdigest()[:12]
    return f"/static/{name}?v={digest}"


def _grid_cells(states: tuple[str | None, ...]) -> Markup:
    """A grid row's cells, built here rather than in a Jinja loop: 20,000 cells render 10x faster.

    A cell carries only its state class; the page's script finds its run (the column's header) and
    task (the row) when it is clicked or hovered.
    """
    return Markup("").join(
        Markup('<td class="cell"></td>') if state is None else Markup('<td class="cell s-%s"></td>') % state
        for state in states
    )


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("controller.ui", "templates"),
        autoescape=True,
        undefined=jinja2.ChainableUndefined,  # bodies are sparse: a missing field renders empty
    )
    env.globals["STATE_COLORS"] = views.STATE_COLORS
    env.globals["static"] = _static_url
    env.filters["tojson_pretty"] = lambda value: json.dumps(value, indent=2, sort_keys=True, default=str)
    env.filters["markdown"] = lambda text: Markup(render_markdown(text))  # sanitised by nh3 first
    env.filters["grid_cells"] = _grid_cells
    env.globals["task_label"] = views.task_label
    env.filters["short_time"] = lambda value: str(value or "")[:19].replace("T", " ") or "—"
    return env


def render(request: web.Request, template: str, **context: Any) -> web.Response:
    settings = request.app[SETTINGS]
    viewer = request[VIEWER]
    html = (
        request.app[TEMPLATES]
        .get_template(template)
        .render(
            viewer=viewer.display,
            csrf=csrf_token(settings, viewer),
            read_only=settings.read_only,
            **context,
        )
    )
    return web.Response(text=html, content_type="text/html")


def _dag_or_404(request: web.Request, namespace: str, name: str) -> dict[str, Any]:
    dag = request.app[STORE].dags.get((namespace, name))
    if dag is None:
        raise web.HTTPNotFound(text=f"DAG {name} not found in namespace {namespace}")
    return dag


def _run_or_404(request: web.Request, namespace: str, name: str) -> dict[str, Any]:
    run = request.app[STORE].runs.get((namespace, name))
    if run is None:
        raise web.HTTPNotFound(text=f"DagRun {name} not found in namespace {namespace}")
    return run


# ------------------------------------------------------------------------------------------- pages


async def index(_: web.Request) -> web.Response:
    raise web.HTTPFound("/dags")


async def dag_list(request: web.Request) -> web.Response:
    store = request.app[STORE]
    query = request.query.get("q", "").strip()
    tag = request.query.get("tag", "").strip()
    status = request.query.get("status", "all")
    namespaces = sorted({ns for ns, _ in store.dags})
    readable: set[str] = set()
    for namespace in namespaces:
        try:
            await require(request, "list", "dags", namespace)
            readable.add(namespace)
        except web.HTTPForbidden:
            continue
    # Filter on the DAGs alone (cheap), then sort the runs of the page's DAGs only.
    dags = {
        (row.namespace, row.name): dag for dag in store.dags_in(readable) if (row := views.dag_row(dag, ()))
    }
    rows = [views.dag_row(dag, ()) for dag in dags.values()]
    if query:
        rows = [row for row in rows if row.matches(query)]
    if tag:
        rows = [row for row in rows if tag in row.tags]
    if status in ("active", "paused"):
        rows = [row for row in rows if row.paused == (status == "paused")]
    page = max(int(request.query.get("page", "1") or 1), 1)
    shown = [
        views.dag_row(dags[(row.namespace, row.name)], store.runs_of(row.namespace, row.name))
        for row in rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    ]
    return render(
        request,
        "dags.html",
        rows=shown,
        total=len(rows),
        page=page,
        pages=max((len(rows) + PAGE_SIZE - 1) // PAGE_SIZE, 1),
        query=query,
        tag=tag,
        status=status,
        hidden_namespaces=len(namespaces) - len(readable),
    )


async def dag_grid(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["dag"]
    await require(request, "get", "dags", namespace)
    await require(request, "list", "dagruns", namespace)
    dag = _dag_or_404(request, namespace, name)
    runs = request.app[STORE].runs_of(namespace, name)
    last = min(max(int(request.query.get("runs", "25") or 25), 1), 365)
    return render(
        request,
        "grid.html",
        dag=dag,
        row=views.dag_row(dag, runs),
        grid=views.grid(dag, runs, last=last),
        last=last,
        watch=f"{namespace}/{name}",
    )


async def dag_graph(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["dag"]
    await require(request, "get", "dags", namespace)
    dag = _dag_or_404(request, namespace, name)
    runs = sorted(request.app[STORE].runs_of(namespace, name), key=views.run_sort_key)
    chosen = request.query.get("run") or (runs[-1]["metadata"]["name"] if runs else "")
    return render(
        request,
        "graph.html",
        dag=dag,
        row=views.dag_row(dag, runs),
        runs=[r["metadata"]["name"] for r in reversed(runs)],
        chosen=chosen,
        watch=f"{namespace}/{name}",
    )


async def dag_dot(request: web.Request) -> web.Response:
    """The graph as DOT (viz.js renders it in the page): `?run=` colours it, `?collapsed=a,b` folds groups."""
    namespace, name = request.match_info["namespace"], request.match_info["dag"]
    await require(request, "get", "dags", namespace)
    dag = _dag_or_404(request, namespace, name)
    states: dict[str, str] | None = None
    if request.query.get("run"):
        await require(request, "get", "dagruns", namespace)
        run = _run_or_404(request, namespace, request.query["run"])
        tis = (run.get("status") or {}).get("taskInstances") or {}
        states = views.task_states(tis)  # a mapped task's instances summarised
    collapsed = {g for g in request.query.get("collapsed", "").split(",") if g}
    return web.Response(
        text=graphs.dag_dot(dag, states=states, collapsed=collapsed), content_type="text/vnd.graphviz"
    )


async def trigger_form(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["dag"]
    await require(request, "get", "dags", namespace)
    dag = _dag_or_404(request, namespace, name)
    spec = dag.get("spec") or {}
    return render(
        request,
        "trigger.html",
        dag=dag,
        fields=params_form.param_fields(spec),
        schema=params_form.params_schema(spec),
    )


async def run_page(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["run"]
    await require(request, "get", "dagruns", namespace)
    run = _run_or_404(request, namespace, name)
    events: list[dict[str, Any]] = []
    events_note = ""
    try:
        await require(request, "list", "events", namespace)
        events = await request.app[KUBE].list_events(namespace, "DagRun", name)
    except web.HTTPForbidden as exc:
        events_note = exc.text or "not allowed"
    except KubeError as exc:
        events_note = f"could not list Events: {exc.reason}"
    dag_name = run["spec"]["dagName"]
    try:
        await require(request, "list", "pods", namespace)
        may_list_pods = True
    except web.HTTPForbidden:
        may_list_pods = False  # earlier tries of the local executor only; the current ones from status
    on_record = await tries.run_attempts(
        request.app[KUBE], run, request.app[SETTINGS].state_dir, pods=may_list_pods
    )
    earlier = {
        task_id: views.earlier_try_spans((a.try_number, a.phase, a.started, a.finished) for a in found)
        for task_id, found in on_record.items()
    }
    return render(
        request,
        "run.html",
        run=run,
        status=run.get("status") or {},
        dag_name=dag_name,
        gantt_rows=views.gantt(run, now=datetime.now(UTC), earlier_tries=earlier),
        display_names=_run_display_names(run),
        events=events,
        events_note=events_note,
        watch=f"{namespace}/{dag_name}",
    )


def _run_display_names(run: dict[str, Any]) -> dict[str, str]:
    """The task display names of the DAG the run started with (its `dagSpec`)."""
    dag_spec = (run.get("status") or {}).get("dagSpec") or {}
    return views.task_display_names({"metadata": {"name": run["spec"]["dagName"]}, "spec": dag_spec})


async def task_page(request: web.Request) -> web.Response:
    namespace, name, task_id = (request.match_info[k] for k in ("namespace", "run", "task"))
    await require(request, "get", "dagruns", namespace)
    run = _run_or_404(request, namespace, name)
    status = run.get("status") or {}
    ti = (status.get("taskInstances") or {}).get(task_id)
    if ti is None:
        raise web.HTTPNotFound(text=f"no task instance {task_id} in {name}")
    dag_spec = status.get("dagSpec") or {}
    task_spec: dict[str, Any] = next(
        (t for t in dag_spec.get("tasks") or [] if t.get("id") == task_id.rsplit(".", 1)[-1]), {}
    )
    try:
        await require(request, "list", "pods", namespace)
        may_list_pods = True
    except web.HTTPForbidden:
        may_list_pods = False  # the page still shows the run's own record and local attempts
    known = await tries.attempts(
        request.app[KUBE], run, task_id, request.app[SETTINGS].state_dir, pods=may_list_pods
    )
    numbers = list(range(1, int(ti.get("tryNumber") or 0) + 1))
    chosen = int(request.query.get("try") or (numbers[-1] if numbers else 0))
    rendered: list[RenderedField] = []
    rendered_note = None
    try:
        rendered = render_task_fields(run, task_id, chosen)
    except RenderingUnavailable as error:
        rendered_note = str(error)
    deferral = ti.get("deferral") or {}
    hitl_request = (
        hitl.request_of(deferral.get("triggerClasspath"), deferral.get("triggerKwargs"))
        if ti.get("state") == "deferred"
        else None
    )
    return render(
        request,
        "task.html",
        run=run,
        ti=ti,
        hitl_request=hitl_request,
        # Airflow's link prefill (`generate_link_to_ui`): `_options` and params in the query
        request_query_options=request.query.getall("_options", []),
        request_query_params={
            k: v for k, v in request.query.items() if hitl_request is not None and k in hitl_request.params
        },
        task_id=task_id,
        task_label=views.task_label(task_id, _run_display_names(run)),
        task_spec=task_spec,
        dag_doc=dag_spec.get("docMd"),
        attempts=known,
        tries=numbers,
        chosen_try=chosen,
        rendered=rendered,
        rendered_note=rendered_note,
        watch=f"{namespace}/{run['spec']['dagName']}",
    )


async def task_log(request: web.Request) -> web.Response:
    namespace, name, task_id = (request.match_info[k] for k in ("namespace", "run", "task"))
    await require(request, "get", "dagruns", namespace)
    run = _run_or_404(request, namespace, name)
    settings = request.app[SETTINGS]
    try_number = int(request.query.get("try", "1"))
    if not tries.local_attempt_dirs(settings.state_dir, run["metadata"]["uid"], task_id):
        await require(request, "get", "pods", namespace, "log")
    text = await tries.try_log(request.app[KUBE], run, task_id, try_number, settings.state_dir)
    if text is None:
        note = task_logs.deleted_pods_note(run)
        why = f": {note}" if note else ""
        raise web.HTTPNotFound(text=f"no log for try {try_number} of {task_id} in {name}{why}")
    return web.Response(text=text, content_type="text/plain")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", index)
    app.router.add_get("/dags", dag_list)
    app.router.add_get("/dags/{namespace}/{dag}", dag_grid)
    app.router.add_get("/dags/{namespace}/{dag}/graph", dag_graph)
    app.router.add_get("/dags/{namespace}/{dag}/graph.dot", dag_dot)
    app.router.add_get("/dags/{namespace}/{dag}/trigger", trigger_form)
    app.router.add_get("/runs/{namespace}/{run}", run_page)
    app.router.add_get("/runs/{namespace}/{run}/tasks/{task}", task_page)
    app.router.add_get("/runs/{namespace}/{run}/tasks/{task}/log", task_log)
    app.router.add_get("/runs/{namespace}/{run}/tasks/{task}/log/stream", log_stream.task_log_stream)
