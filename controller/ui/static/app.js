// Zonda UI: live updates (Server-Sent Events), actions (JSON + CSRF token), the graph (viz.js),
// collapsible task groups and logs. User text is only ever put into the page with textContent.

const csrf = document.querySelector('meta[name="csrf-token"]').content;

function toast(message, isError = false) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.className = isError ? "show error" : "show";
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.className = ""; }, isError ? 9000 : 4000);
}

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  const text = await response.text();
  let data;
  try { data = JSON.parse(text); } catch (e) { data = { error: text }; }
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

// ------------------------------------------------------------------------------------ live

let refreshTimer = null;
let refreshing = false;

async function refresh(seenAt) {
  if (refreshing) { refreshTimer = setTimeout(() => refresh(seenAt), 100); return; }
  refreshing = true;
  try {
    const response = await fetch(location.href, { credentials: "same-origin" });
    if (!response.ok) return;
    const html = await response.text();
    const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("content");
    const active = document.activeElement;
    if (fresh && !(active && active.closest && active.closest("form, dialog"))) {
      document.getElementById("content").replaceWith(fresh);
      initPage();
    }
    document.body.dataset.lastChange = String(seenAt);
    document.body.dataset.refreshedAt = String(Date.now() / 1000);
  } finally {
    refreshing = false;
  }
}

function startLive() {
  const watch = document.body.dataset.watch;
  const url = watch && watch !== "*" ? `/api/changes?dag=${encodeURIComponent(watch)}` : "/api/changes";
  const source = new EventSource(url);
  const dot = document.getElementById("live");
  source.onopen = () => { dot.className = "live on"; document.body.dataset.live = "on"; };
  source.onerror = () => { dot.className = "live off"; };
  source.addEventListener("change", (event) => {
    const change = JSON.parse(event.data);
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => refresh(change.seenAt), 60);
  });
}

// ------------------------------------------------------------------------------- grid groups

function collapsedKey() { return `zonda.collapsed.${document.body.dataset.watch}`; }
function collapsedGroups() {
  try { return new Set(JSON.parse(localStorage.getItem(collapsedKey()) || "[]")); } catch (e) { return new Set(); }
}
function saveCollapsed(groups) { localStorage.setItem(collapsedKey(), JSON.stringify([...groups])); }

function applyGridGroups() {
  const groups = collapsedGroups();
  document.querySelectorAll("table.grid tbody tr").forEach((row) => {
    const parents = (row.dataset.parents || "").split(" ").filter(Boolean);
    row.hidden = parents.some((g) => groups.has(g));
  });
  document.querySelectorAll(".group-toggle").forEach((button) => {
    const collapsed = groups.has(button.dataset.group);
    button.textContent = collapsed ? "▸" : "▾";
    button.setAttribute("aria-expanded", collapsed ? "false" : "true");
  });
}

function toggleGroup(group) {
  const groups = collapsedGroups();
  if (groups.has(group)) groups.delete(group); else groups.add(group);
  saveCollapsed(groups);
}

// -------------------------------------------------------------------------------------- graph

let viz = null;
// Every `.graph[data-dot-url]` of the page: the DAG's graph (#graph) or each namespace's asset graph.
async function renderGraphs() {
  await Promise.all([...document.querySelectorAll(".graph[data-dot-url]")].map((box) =>
    renderGraph(box).catch((e) => { box.textContent = `graph failed: ${e}`; })));
}

async function renderGraph(box) {
  if (!viz) {
    const module = await import("./vendor/viz.js");
    viz = await module.instance();
  }
  const params = new URLSearchParams();
  if (box.dataset.run) params.set("run", box.dataset.run);
  const groups = collapsedGroups();
  if (box.id === "graph" && groups.size) params.set("collapsed", [...groups].join(","));
  const response = await fetch(`${box.dataset.dotUrl}?${params}`, { credentials: "same-origin" });
  const dot = await response.text();
  if (!response.ok) throw new Error(`${response.status} ${dot}`);
  const svg = viz.renderSVGElement(dot);
  box.replaceChildren(svg);
  box.dataset.rendered = "true";
  svg.querySelectorAll("g.cluster, g.node").forEach((g) => {
    const id = g.id || "";
    if (id.startsWith("cluster-") || id.startsWith("node-group:")) {
      g.classList.add("clickable");
      g.addEventListener("click", () => {
        toggleGroup(id.startsWith("cluster-") ? id.slice(8) : id.slice(11));
        renderGraph(box);
      });
    } else if (id.startsWith("node-") && box.dataset.run) {
      g.classList.add("clickable");
      g.addEventListener("click", () => {
        location.href = `/runs/${encodeURIComponent(box.dataset.ns)}/${encodeURIComponent(box.dataset.run)}/tasks/${encodeURIComponent(id.slice(5))}`;
      });
    }
  });
}

// ---------------------------------------------------------------------------------------- logs

// A try's log is streamed (Server-Sent Events from /log/stream): the server sends it as it is
// written and an `end` event once the try is over. A live refresh of the page replaces #log; the
// stream goes on and the new element gets the text so far.
let logStream = null; // { url, source, text, ended, note }

function showLog() {
  const pre = document.getElementById("log");
  if (!pre || !logStream || pre.dataset.stream !== logStream.url) return;
  const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.textContent = logStream.text || (logStream.ended ? logStream.note || "(empty log)" : "loading…");
  pre.dataset.loaded = String(logStream.text.length > 0 || logStream.ended);
  pre.dataset.streaming = logStream.ended ? "ended" : "open";
  if (atBottom) pre.scrollTop = pre.scrollHeight;
}

function loadLog() {
  const pre = document.getElementById("log");
  if (!pre) { if (logStream) { logStream.source.close(); logStream = null; } return; }
  if (logStream && logStream.url === pre.dataset.stream) { showLog(); return; }
  if (logStream) logStream.source.close();
  const source = new EventSource(pre.dataset.stream);
  const stream = { url: pre.dataset.stream, source, text: "", ended: false, note: "" };
  logStream = stream;
  source.onopen = () => { stream.text = ""; }; // (re)connected: the server sends the log from its start
  source.onmessage = (event) => { stream.text += event.data; showLog(); };
  source.addEventListener("end", (event) => {
    source.close();
    stream.ended = true;
    stream.note = event.data;
    showLog();
  });
  source.onerror = () => {
    if (stream.ended || source.readyState !== EventSource.CLOSED) return; // the browser reconnects
    stream.ended = true; // refused (403/404): say why, from the plain log URL
    fetch(pre.dataset.url, { credentials: "same-origin" }).then(async (response) => {
      const text = await response.text();
      if (response.ok) stream.text = text; else stream.note = `(${response.status}) ${text}`;
      showLog();
    });
  };
}

// -------------------------------------------------------------------------------------- actions

function triggerConf(form) {
  let conf = {};
  const raw = form.querySelector("#raw-conf").value.trim();
  if (raw) conf = JSON.parse(raw);
  if (typeof conf !== "object" || conf === null || Array.isArray(conf)) throw new Error("the configuration must be a JSON object");
  form.querySelectorAll("[data-param]").forEach((input) => {
    const kind = input.dataset.kind;
    if ("unsetIfEmpty" in input.dataset && input.value === "") return; // no default: the run must be given it
    let value;
    if (kind === "boolean") value = input.checked;
    else if (kind === "integer") value = input.value === "" ? null : parseInt(input.value, 10);
    else if (kind === "number") value = input.value === "" ? null : Number(input.value);
    else if (kind === "json") value = JSON.parse(input.value || "null");
    else value = input.value;
    conf[input.dataset.param] = value;
  });
  return conf;
}

function clearDialog(button) {
  const dialog = document.createElement("dialog");
  dialog.className = "clear-dialog";
  const title = document.createElement("h2");
  title.textContent = `Clear ${button.dataset.task}`;
  const options = document.createElement("div");
  for (const [name, label] of [["downstream", "Downstream"], ["upstream", "Upstream"], ["only_failed", "Only failed"]]) {
    const wrap = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox"; box.name = name; box.checked = name === "downstream";
    wrap.append(box, ` ${label} `);
    options.append(wrap);
  }
  const preview = document.createElement("ul");
  preview.className = "preview";
  const error = document.createElement("p");
  error.className = "error";
  const confirm = document.createElement("button");
  confirm.textContent = "Clear these";
  confirm.className = "confirm-clear";
  const cancel = document.createElement("button");
  cancel.textContent = "Cancel";
  dialog.append(title, options, preview, error, confirm, cancel);
  document.body.append(dialog);
  const url = `/api/runs/${encodeURIComponent(button.dataset.ns)}/${encodeURIComponent(button.dataset.run)}/clear`;
  const body = (dryRun) => {
    const data = { tasks: [button.dataset.task], dry_run: dryRun };
    options.querySelectorAll("input").forEach((box) => { data[box.name] = box.checked; });
    return data;
  };
  const showPreview = async () => {
    error.textContent = "";
    try {
      const result = await post(url, body(true));
      preview.replaceChildren(...result.tasks.map((t) => { const li = document.createElement("li"); li.textContent = t; return li; }));
      if (!result.tasks.length) preview.textContent = "Nothing to clear.";
    } catch (e) { error.textContent = e.message; }
  };
  options.addEventListener("change", showPreview);
  cancel.addEventListener("click", () => dialog.remove());
  confirm.addEventListener("click", async () => {
    try {
      const result = await post(url, body(false));
      dialog.remove();
      toast(`Cleared ${result.tasks.length} task instance(s): ${result.tasks.join(", ")}`);
    } catch (e) { error.textContent = e.message; }
  });
  dialog.showModal();
  showPreview();
}

// A grid cell knows only its state: its run is its column's header, its task its row.
function gridCell(target) {
  const cell = target.closest("table.grid td.cell");
  if (!cell || !cell.className.includes("s-")) return null;
  const row = cell.parentElement;
  const header = cell.closest("table").tHead.rows[0].cells[cell.cellIndex];
  const state = cell.className.replace("cell s-", "");
  return { cell, row, run: header.dataset.run, key: row.dataset.key, group: row.classList.contains("group"), state };
}

document.addEventListener("mouseover", (event) => {
  const found = event.target instanceof Element && gridCell(event.target);
  if (found && !found.cell.title) found.cell.title = `${found.key.replace(/^group:/, "")} · ${found.run}: ${found.state}`;
});

document.addEventListener("click", async (event) => {
  const target = event.target;
  if (!(target instanceof Element)) return;
  const found = gridCell(target);
  if (found && !found.group) {
    const ns = found.cell.closest("table").dataset.ns;
    location.href = `/runs/${encodeURIComponent(ns)}/${encodeURIComponent(found.run)}/tasks/${encodeURIComponent(found.key)}`;
    return;
  }
  const groupButton = target.closest(".group-toggle");
  if (groupButton) { toggleGroup(groupButton.dataset.group); applyGridGroups(); return; }
  const clearButton = target.closest(".clear-button");
  if (clearButton) { clearDialog(clearButton); return; }
  const markButton = target.closest(".mark-button");
  if (markButton) {
    const { ns, run, task, state } = markButton.dataset;
    if (!window.confirm(`Mark ${task} ${state}?`)) return;
    try {
      await post(`/api/runs/${encodeURIComponent(ns)}/${encodeURIComponent(run)}/mark`, { task, state });
      toast(`${task} marked ${state}`);
    } catch (e) { toast(e.message, true); }
  }
});

document.addEventListener("change", async (event) => {
  const box = event.target;
  if (!(box instanceof HTMLInputElement) || !box.classList.contains("pause-toggle")) return;
  try {
    await post(`/api/dags/${encodeURIComponent(box.dataset.ns)}/${encodeURIComponent(box.dataset.dag)}/paused`, { paused: !box.checked });
    toast(`${box.dataset.dag} ${box.checked ? "unpaused" : "paused"}`);
  } catch (e) {
    box.checked = !box.checked;
    toast(e.message, true);
  }
});

// A human-in-the-loop request: the chosen options and the params (JSON when they parse, else text).
document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || form.id !== "hitl-form") return;
  event.preventDefault();
  const error = document.getElementById("hitl-error");
  error.textContent = "";
  const options = [...form.querySelectorAll('input[name="_options"]:checked')].map((box) => box.value);
  const params = {};
  for (const input of form.querySelectorAll("input.hitl-param")) {
    try { params[input.name] = JSON.parse(input.value); } catch (e) { params[input.name] = input.value; }
  }
  const { ns, run, task } = form.dataset;
  try {
    await post(`/api/runs/${encodeURIComponent(ns)}/${encodeURIComponent(run)}/tasks/${encodeURIComponent(task)}/respond`, { options, params });
    toast(`${task} answered: ${options.join(", ")}`);
  } catch (e) { error.textContent = e.message; }
});

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || form.id !== "trigger-form") return;
  event.preventDefault();
  const error = document.getElementById("trigger-error");
  error.textContent = "";
  try {
    const conf = triggerConf(form);
    const body = { conf };
    const logicalDate = form.querySelector("#logical-date").value.trim();
    if (logicalDate) body.logicalDate = logicalDate;  // none: now, or no logical date for an Airflow 3 DAG
    const result = await post(`/api/dags/${encodeURIComponent(form.dataset.ns)}/${encodeURIComponent(form.dataset.dag)}/trigger`, body);
    location.href = `/dags/${encodeURIComponent(form.dataset.ns)}/${encodeURIComponent(form.dataset.dag)}?triggered=${encodeURIComponent(result.run)}`;
  } catch (e) {
    error.textContent = e.message;
  }
});

function initPage() {
  applyGridGroups();
  renderGraphs();
  loadLog();
}

initPage();
startLive();
