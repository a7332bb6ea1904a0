// fairshare dashboard: vanilla JS, no build step, no outside resources (the service may
// run on a machine without internet). It polls the same HTTP API the CLI clients use,
// with the token the user typed, and redraws everything from the answers; nothing is
// computed here that the server does not already say (shares, utilization, states).
"use strict";

const TOKEN_KEY = "fairshare.token";
const POLL_INTERVAL_MS = 2000;
// The jobs table shows this many of the newest jobs: a poll every 2 s must not fetch
// every job a long-running service has seen (one page of the API, GET /v1/jobs?limit=).
const JOBS_SHOWN = 200;
const JOBS_PATH = "/v1/jobs?order=newest&limit=" + JOBS_SHOWN;
// Chart line colours, picked by position (resources in the server's order, queues by
// path), so a resource keeps its colour from one poll to the next.
const PALETTE = ["#2f6fde", "#e0781f", "#1a7f37", "#b3261e", "#7b4bd1", "#0f8b8d",
                 "#c2417f", "#6b7280", "#9a6700", "#14532d"];
const SVG_NS = "http://www.w3.org/2000/svg";

let pollTimer = null;
// Jobs whose task list is open; kept across polls so a redraw does not close them.
const expandedJobs = new Set();

// ------------------------------------------------------------------ small helpers

function $(id) { return document.getElementById(id); }

function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children || []) node.appendChild(child);
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, String(value));
  }
  return node;
}

// A fraction as a percentage with one decimal ("40.0%"); the server's numbers are shown
// as they are, a missing one as an em dash.
function pct(fraction) {
  return typeof fraction === "number" && isFinite(fraction) ? (fraction * 100).toFixed(1) + "%" : "\u2014";
}

function num(value) {
  if (typeof value !== "number" || !isFinite(value)) return "\u2014";
  return Number.isInteger(value) ? String(value) : String(Math.round(value * 1000) / 1000);
}

// The service's times are wall-clock seconds since the epoch (status.time, history
// samples, task start and finish); shown as local clock time, 24-hour.
function clock(epochSeconds) {
  if (typeof epochSeconds !== "number" || !isFinite(epochSeconds)) return "\u2014";
  return new Date(epochSeconds * 1000).toLocaleTimeString([], { hour12: false });
}

// Queue paths in tree order: a parent before its children, siblings by name.
function compareQueuePaths(a, b) {
  const pa = a.split("."), pb = b.split(".");
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    if (pa[i] !== pb[i]) return pa[i] < pb[i] ? -1 : 1;
  }
  return pa.length - pb.length;
}

// ------------------------------------------------------------------ API access

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path) {
  const token = sessionStorage.getItem(TOKEN_KEY) || "";
  let response;
  try {
    response = await fetch(path, { headers: { "Authorization": "Bearer " + token }, cache: "no-store" });
  } catch (err) {
    throw new ApiError(0, "cannot reach the server (" + err.message + ")");
  }
  if (!response.ok) {
    let reason = response.statusText || "request failed";
    try {
      // The API's refusals: {"error": {"field", "reason"}, "errors": [...]}.
      const body = await response.json();
      if (body && body.error) {
        reason = (body.error.field ? body.error.field + ": " : "") + body.error.reason;
      } else if (body && body.detail !== undefined) {
        reason = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
      }
    } catch (_) { /* not JSON: keep the status text */ }
    throw new ApiError(response.status, "GET " + path + ": HTTP " + response.status + ": " + reason);
  }
  return response.json();
}

// ------------------------------------------------------------------ rendering

function renderSummary(status) {
  $("summary-policy").textContent = status.policy ?? "\u2014";
  $("summary-time").textContent = clock(status.time);
  $("summary-decisions").textContent = num(status.decisions_total);
  $("summary-running").textContent = num(status.running_tasks);
  $("summary-pending").textContent = num(status.pending_tasks);
  $("summary-updated").textContent = clock(Date.now() / 1000);  // when this browser last heard back
  $("summary").hidden = false;
}

function renderQueues(status) {
  const body = $("queue-tree").tBodies[0];
  const queues = status.queues || {};
  const paths = Object.keys(queues).sort(compareQueuePaths);
  body.replaceChildren();
  $("queues-empty").hidden = paths.length > 0;
  $("queue-tree").hidden = paths.length === 0;
  // with decayed usage (fairness.half_life > 0) one more column: the effective dominant
  // share (allocation plus decayed usage), the decayed average allocation in its tooltip
  const decayed = paths.some((path) => queues[path].effective_dominant_share != null);
  for (const th of $("queue-tree").querySelectorAll("th.decayed")) th.hidden = !decayed;
  for (const path of paths) {
    const q = queues[path];
    const parts = path.split(".");
    const depth = parts.length - 1;
    const nameCell = el("td", { class: "queue-name" }, [
      el("span", { class: "branch", text: depth ? "\u2514 " : "" }),
      el("span", { class: "name", text: parts[parts.length - 1] }),
    ]);
    nameCell.style.paddingLeft = (0.6 + 1.4 * depth) + "em";
    nameCell.title = path;

    const current = q.current_dominant_share, fair = q.fair_dominant_share;
    const bar = el("div", { class: "share-bar" }, [el("div", { class: "current" }), el("div", { class: "fair" })]);
    // Shares are fractions of the cluster (0..1); clamp only the drawing, not the numbers.
    bar.children[0].style.width = (Math.min(Math.max(current || 0, 0), 1) * 100) + "%";
    bar.children[1].style.left = (Math.min(Math.max(fair || 0, 0), 1) * 100) + "%";
    bar.title = "current " + pct(current) + ", fair " + pct(fair);

    body.appendChild(el("tr", {
      class: "queue", "data-queue": path, "data-depth": String(depth),
      "data-current": String(current), "data-fair": String(fair),
      ...(decayed ? { "data-effective": String(q.effective_dominant_share) } : {}),
    }, [
      nameCell,
      el("td", { class: "num weight", text: num(q.weight) }),
      el("td", {}, [bar]),
      el("td", { class: "num current", text: pct(current) }),
      el("td", { class: "num fair", text: pct(fair) }),
      el("td", { class: "num running", text: num(q.running_tasks) }),
      el("td", { class: "num pending", text: num(q.pending_tasks) }),
    ].concat(decayed ? [el("td", {
      class: "num effective", text: pct(q.effective_dominant_share),
      title: "decayed average allocation: " + Object.entries(q.decayed_usage || {})
        .map(([r, v]) => r + " " + num(v)).join(", "),
    })] : [])));
  }
}

// A line chart of fractions (0..1) over time. series: [{key, label, color, points: [[t, v], ...]}].
function renderLineChart(container, series, emptyText) {
  const W = 720, H = 220, left = 44, right = 12, top = 10, bottom = 28;
  const plotW = W - left - right, plotH = H - top - bottom;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  const times = series.flatMap(s => s.points.map(p => p[0]));
  let t0 = Math.min(...times), t1 = Math.max(...times);
  if (!times.length) { t0 = 0; t1 = 1; }
  if (t1 === t0) t1 = t0 + 1;  // one sample: draw it at the left edge of a 1 s axis
  // The y axis is 0..100% unless a value goes above (it should not: fractions of capacity).
  const yMax = Math.max(1, ...series.flatMap(s => s.points.map(p => p[1])));
  const x = t => left + (t - t0) / (t1 - t0) * plotW;
  const y = v => top + plotH - v / yMax * plotH;

  for (let i = 0; i <= 4; i++) {
    const v = yMax * i / 4, yy = y(v);
    root.appendChild(svg("line", { class: "grid", x1: left, x2: left + plotW, y1: yy, y2: yy }));
    root.appendChild(svg("text", { x: left - 6, y: yy + 4, "text-anchor": "end", text: Math.round(v * 100) + "%" }));
  }
  for (let i = 0; i <= 4; i++) {
    const t = t0 + (t1 - t0) * i / 4, xx = x(t);
    root.appendChild(svg("text", { x: xx, y: H - 8, "text-anchor": "middle", text: times.length ? clock(t) : "" }));
  }
  root.appendChild(svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: top + plotH }));
  root.appendChild(svg("line", { class: "axis", x1: left, x2: left + plotW, y1: top + plotH, y2: top + plotH }));

  for (const s of series) {
    // A sample holds until the next one (the service samples a step function), so the
    // line is drawn as steps, not as slopes between samples.
    const corners = [];
    s.points.forEach(([t, v], i) => {
      if (i > 0) corners.push([t, s.points[i - 1][1]]);
      corners.push([t, v]);
    });
    const points = corners.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    const last = s.points.length ? s.points[s.points.length - 1][1] : "";
    const line = svg("polyline", { points, stroke: s.color, "data-series": s.key, "data-samples": s.points.length,
                                   "data-last": last });
    if (s.dashed) line.setAttribute("stroke-dasharray", "7 4");
    line.appendChild(svg("title", { text: s.label }));
    root.appendChild(line);
  }
  if (!times.length) {
    root.appendChild(svg("text", { x: left + plotW / 2, y: top + plotH / 2, "text-anchor": "middle", text: emptyText }));
  }
  container.replaceChildren(root);
}

function renderLegend(list, entries) {
  list.replaceChildren(...entries.map(e => {
    const key = el("span", { class: "key" + (e.dashed ? " dashed" : "") });
    key.style.color = e.color;
    return el("li", { "data-series": e.key }, [key, el("span", { class: "label", text: e.label + " " }),
      el("span", { class: "value", text: e.value })]);
  }));
}

function renderUtilization(status, history) {
  const resources = status.resources || Object.keys(status.utilization || {});
  const series = resources.map((resource, i) => ({
    key: resource, label: resource, color: PALETTE[i % PALETTE.length],
    points: history.filter(h => h.utilization && typeof h.utilization[resource] === "number")
                   .map(h => [h.time, h.utilization[resource]]),
  }));
  renderLineChart($("utilization-chart"), series, "no samples yet");
  renderLegend($("utilization-legend"), series.map(s => ({
    key: s.key, label: s.label, color: s.color, value: pct((status.utilization || {})[s.key]) + " now",
  })));
}

function renderShareHistory(status, history) {
  const paths = Object.keys(status.queues || {}).sort(compareQueuePaths);
  const series = paths.map((path, i) => ({
    key: path, label: path, color: PALETTE[i % PALETTE.length],
    // a child queue's line is dashed: it often coincides with its parent's (an only busy child)
    dashed: path.includes("."),
    points: history.filter(h => h.queues && typeof h.queues[path] === "number").map(h => [h.time, h.queues[path]]),
  }));
  renderLineChart($("shares-chart"), series, "no samples yet");
  renderLegend($("shares-legend"), series.map(s => ({
    key: s.key, label: s.label, color: s.color, dashed: s.dashed,
    value: pct(((status.queues || {})[s.key] || {}).current_dominant_share) + " now",
  })));
}

function renderNodes(status) {
  const resources = status.resources || [];
  const body = $("nodes").tBodies[0];
  body.replaceChildren(...(status.nodes || []).map(node => {
    const usage = resources
      .filter(r => (node.capacity || {})[r])
      .map(r => `${r} ${num((node.used || {})[r] || 0)}/${num(node.capacity[r])}`).join(", ");
    return el("tr", { "data-node": node.name }, [
      el("td", { text: node.name }),
      el("td", { class: node.alive ? "" : "node-down", text: node.alive ? "up" : "down" }),
      el("td", { text: usage }),
    ]);
  }));
}

function taskTable(job) {
  const head = el("tr", {}, ["task", "class", "state", "node", "attempts", "started", "finished", "exit", "message"]
    .map(h => el("th", { text: h })));
  const rows = (job.tasks || []).map(t => el("tr", { class: "task", "data-task": String(t.id) }, [
    el("td", { class: "id", text: String(t.id) }),
    el("td", { class: "class", text: t.class ?? "" }),
    el("td", { class: "state state-" + t.state, text: t.state ?? "" }),
    el("td", { class: "node", text: t.node ?? "\u2014" }),
    el("td", { class: "num", text: num(t.attempts) }),
    el("td", { class: "num", text: clock(t.started_at) }),
    el("td", { class: "num", text: clock(t.finished_at) }),
    el("td", { class: "num", text: t.exit_code ?? "\u2014" }),
    el("td", { class: "message", text: t.message ?? "" }),
  ]));
  return el("table", { class: "grid task-table" }, [el("thead", {}, [head]), el("tbody", {}, rows)]);
}

// A job with tasks that have not started is explained (GET /v1/jobs/{id}/explain).
function waiting(job) {
  return (job.state === "pending" || job.state === "running") &&
    job.tasks_done + job.tasks_running < job.tasks_total;
}

function amounts(mapping) {
  return Object.entries(mapping || {}).filter(([, v]) => v).map(([r, v]) => num(v) + " " + r).join(", ") || "nothing";
}

// One reason as a sentence with its numbers (the server's; report/explain.py words them
// the same way for `fairshare why`).
function reasonText(r) {
  switch (r.kind) {
    case "priority_held":
      return `held by priority: job(s) ${(r.higher || []).join(", ")} of higher priority in its queue go first`;
    case "queue_limit":
      return `queue ${r.queue} is at its ${r.resource} limit: uses ${num(r.usage)} + ${num(r.demand)} asked, ` +
        `limit ${num(r.limit)}`;
    case "reserved_for":
      return `reserved for gang ${r.gang}: ${amounts(r.held)} held on ${(r.held_nodes || []).join(", ")} until ` +
        `it starts; its next task would fit on ${(r.would_fit_on || []).join(", ")} without the hold`;
    case "gang_incomplete":
      return `gang incomplete: no room for all ${r.tasks} tasks at once (${amounts(r.demand)}; free ` +
        `${amounts(r.free)})` + (r.fits_in_total ? ": fragmentation" : "");
    case "no_node_fits":
      return `no node fits its next task (${amounts(r.demand)}) among ${r.eligible_nodes} eligible node(s)` +
        (r.best_node ? `; closest ${r.best_node}, short of ${amounts(r.shortfall)}` : "") +
        (r.fits_in_total ? "; the free capacity in total would hold it: fragmentation" : "");
    case "guarantee_owed":
      return `queue ${r.queue} is below its guarantee (uses ${amounts(r.usage)} of ${amounts(r.guarantee)}): ` +
        `its job ${r.job} goes first`;
    case "behind_fair_share":
      return `behind ${r.ahead} at ${r.level || "the root"}: dominant share ${pct(r.dominant_share)} of ` +
        `${r.dominant_resource} (weight ${num(r.weight)}) against ${pct(r.ahead_dominant_share)} of ` +
        `${r.ahead_dominant_resource} (weight ${num(r.ahead_weight)})`;
    default:
      return r.kind;
  }
}

function whyPanel(id, why) {
  if (why.error) return el("p", { class: "error", text: why.error });
  const items = (why.reasons || []).map(r => el("li", { class: "reason", "data-kind": r.kind, text: reasonText(r) }));
  const start = why.estimated_start === null || why.estimated_start === undefined
    ? "unknown" : clock(why.estimated_start);
  return el("div", { class: "why", "data-job-why": id }, [
    el("h3", { text: "Why it waits" }),
    el("ul", {}, items),
    el("p", { class: "estimated-start", text: "Estimated start: " + start }),
  ]);
}

async function renderJobs(jobs) {
  const body = $("jobs").tBodies[0];
  $("jobs-empty").hidden = jobs.length > 0;
  // Fetch the open jobs' details first, so the table is replaced in one step.
  const details = new Map();
  const whys = new Map();
  await Promise.all(jobs.filter(j => expandedJobs.has(String(j.id))).map(async j => {
    try { details.set(String(j.id), await api("/v1/jobs/" + encodeURIComponent(j.id))); }
    catch (err) { details.set(String(j.id), { error: err.message }); }
    if (!waiting(j)) return;
    try { whys.set(String(j.id), await api("/v1/jobs/" + encodeURIComponent(j.id) + "/explain")); }
    catch (err) { whys.set(String(j.id), { error: err.message }); }
  }));
  const rows = [];
  for (const job of jobs) {
    const id = String(job.id);
    const open = expandedJobs.has(id);
    const row = el("tr", { class: "job", "data-job": id, "aria-expanded": String(open) }, [
      el("td", { class: "toggle", text: open ? "\u25be" : "\u25b8" }),
      el("td", { class: "id", text: id }),
      el("td", { class: "name", text: job.name ?? "" }),
      el("td", { class: "queue", text: job.queue || "(root)" }),
      el("td", { class: "tenant", text: job.tenant ?? "" }),
      el("td", { class: "state state-" + job.state, text: job.state ?? "" }),
      el("td", { class: "num progress", text: `${num(job.tasks_done)} / ${num(job.tasks_total)}` }),
    ]);
    row.addEventListener("click", () => toggleJob(id));
    rows.push(row);
    if (open) {
      const detail = details.get(id) || {};
      const content = detail.error ? el("p", { class: "error", text: detail.error }) : taskTable(detail);
      const parts = whys.has(id) ? [whyPanel(id, whys.get(id)), content] : [content];
      const cell = el("td", { colspan: "7" }, parts);
      rows.push(el("tr", { class: "tasks", "data-job-tasks": id }, [cell]));
    }
  }
  body.replaceChildren(...rows);
  $("jobs-more").hidden = jobs.length < JOBS_SHOWN;
}

function toggleJob(id) {
  if (expandedJobs.has(id)) expandedJobs.delete(id); else expandedJobs.add(id);
  refresh();
}

// ------------------------------------------------------------------ errors, token, polling

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

function showTokenForm(message) {
  stopPolling();
  $("dashboard").hidden = true;
  $("summary").hidden = true;
  $("session").hidden = true;
  $("token-form").hidden = false;
  showError(message || "");
  $("token-input").focus();
}

// One refresh at a time: a slow server must not pile up overlapping polls. A refresh
// asked for meanwhile (a click on a job) runs once the current one ends.
let refreshing = false;
let refreshAgain = false;
async function refresh() {
  if (refreshing) { refreshAgain = true; return; }
  refreshing = true;
  refreshAgain = false;
  try {
    const [status, history, jobs] = await Promise.all([api("/v1/status"), api("/v1/history"), api(JOBS_PATH)]);
    if (!sessionStorage.getItem(TOKEN_KEY)) return;  // signed out while the answers were on their way
    renderSummary(status);
    renderQueues(status);
    renderUtilization(status, Array.isArray(history) ? history : []);
    renderShareHistory(status, Array.isArray(history) ? history : []);
    renderNodes(status);
    await renderJobs(Array.isArray(jobs) ? jobs.reverse() : []);  // (oldest of the page first, as before)
    $("dashboard").hidden = false;
    $("session").hidden = false;
    showError("");
    document.body.dataset.ready = "true";  // for tests and scripts: the first full render is done
  } catch (err) {
    if (err.status === 401 || err.status === 403) {
      sessionStorage.removeItem(TOKEN_KEY);
      showTokenForm("Token rejected (" + err.message + "). Enter a valid token.");
    } else {
      // Keep the last good picture on screen and say it is stale; polling continues.
      showError("Could not refresh: " + err.message);
    }
  } finally {
    refreshing = false;
    if (refreshAgain && pollTimer !== null) refresh();
  }
}

function startPolling() {
  stopPolling();
  $("token-form").hidden = true;
  refresh();
  pollTimer = setInterval(refresh, POLL_INTERVAL_MS);
}

function stopPolling() {
  if (pollTimer !== null) clearInterval(pollTimer);
  pollTimer = null;
}

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", event => {
    event.preventDefault();
    const token = $("token-input").value.trim();
    if (!token) { showError("Enter a token."); return; }
    sessionStorage.setItem(TOKEN_KEY, token);
    $("token-input").value = "";
    startPolling();
  });
  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    expandedJobs.clear();
    delete document.body.dataset.ready;
    showTokenForm("");
  });
  if (sessionStorage.getItem(TOKEN_KEY)) startPolling(); else showTokenForm("");
});
