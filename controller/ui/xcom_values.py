"""The value of a task instance's XCom, as JSON: what the task page links to for a stored value.

Status keeps a value over 1 KiB as a reference (`zonda.tries.xcoms`); the page shows the reference and its
size, and links here, so a 3 MB value is fetched only when asked for. XComChunks are read with the
UI's own account (it may `get` them, like DagRuns) once the viewer is allowed to `get` them too;
a value in object storage is read with the UI's credentials for that storage.
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from controller.ui.app_state import KUBE, STORE, require
from controller.xcom.backends import XComStore
from controller.xcom.reads import read_chunks
from zonda.resources import xcom_chunks
from zonda.resources.dagrun_models import TaskInstanceStatus
from zonda.resources.models import FINISHED_TI_STATES
from zonda.tries import xcoms


async def xcom_value(request: web.Request) -> web.Response:
    namespace, name, task_id = (request.match_info[k] for k in ("namespace", "run", "task"))
    key = request.query.get("key", xcoms.RETURN_KEY)
    await require(request, "get", "dagruns", namespace)
    run = request.app[STORE].runs.get((namespace, name))
    if run is None:
        raise web.HTTPNotFound(text=f"DagRun {name} not found in namespace {namespace}")
    raw = ((run.get("status") or {}).get("taskInstances") or {}).get(task_id)
    if raw is None:
        raise web.HTTPNotFound(text=f"no task instance {task_id} in {name}")
    ti = TaskInstanceStatus.model_validate(raw)
    value = ti.xcom if key == xcoms.RETURN_KEY else (ti.xcoms or {}).get(key)
    if ti.state not in FINISHED_TI_STATES or value is None:
        raise web.HTTPNotFound(text=f"task instance {task_id} has no XCom {key!r}")
    if xcoms.is_stored(value):
        url = xcoms.stored_url(value)
        try:
            if xcom_chunks.is_chunk_url(url):
                await require(request, "get", xcom_chunks.PLURAL, namespace)
                value = await read_chunks(request.app[KUBE], url, xcoms.stored_size(value))
            else:
                value = await asyncio.to_thread(XComStore(backend="none").load, value)
        except (xcoms.XComError, ValueError) as error:
            raise web.HTTPNotFound(text=f"the stored XCom {key!r} cannot be read: {error}") from error
    return web.Response(text=json.dumps(value, indent=2, ensure_ascii=False), content_type="application/json")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/runs/{namespace}/{run}/tasks/{task}/xcom", xcom_value)
