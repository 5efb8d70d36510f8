// The agentq dashboard: plain JavaScript over the same HTTP API any client uses.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const TERMINAL = new Set(["finish", "error", "abort"]);
let stopView = () => {};

// The key is posted once for an HttpOnly session cookie (SameSite=Strict) and then
// forgotten: the page never stores it, and no URL carries it. Every request below,
// EventSource included, is same-origin and authenticated by that cookie.
async function signIn(key) {
  const response = key
    ? await fetch("/v1/session", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ key }) })
    : await fetch("/v1/session", { method: "DELETE" });
  return response.ok;
}

async function api(path, options = {}) {
  const headers = { "content-type": "application/json", ...(options.headers || {}) };
  const response = await fetch(path, { ...options, headers });
  const body = response.status === 204 ? null : await response.json();
  if (!response.ok) throw new Error((body && body.error && body.error.message) || response.statusText);
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) node.setAttribute(k, v);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function age(seconds) {
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 60) return `${Math.floor(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

function json(value) { return typeof value === "string" ? value : JSON.stringify(value, null, 2); }

// -- fleet -------------------------------------------------------------------

async function refreshFleet() {
  try {
    const fleet = await api("/v1/fleet");
    const queues = Object.entries(fleet.queues).map(([q, n]) => `${q} ${n}`).join(" · ");
    $("#fleet").textContent = `${fleet.workers} worker${fleet.workers === 1 ? "" : "s"} · ready or running: ${queues}`;
  } catch (err) {
    $("#fleet").textContent = err.message;
  }
}

// -- runs list -----------------------------------------------------------------

// The list's filters, kept for the tab (sessionStorage): a run page and back keeps them.
const FILTERS = { q: "filter-q", status: "filter-status", error_kind: "filter-error-kind", model: "filter-model",
  meta: "filter-meta", tenant: "filter-tenant", from: "filter-from", to: "filter-to" };
const PAGE_SIZE = 100;

function listQuery(values) {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
  for (const name of ["q", "status", "error_kind", "model", "tenant"]) {
    if (values[name].trim()) params.set(name, values[name].trim());
  }
  const [k, ...rest] = values.meta.split("=");
  if (k.trim() && rest.length) params.set(`metadata.${k.trim()}`, rest.join("=").trim());
  // datetime-local is the browser's local time; the API takes Unix seconds.
  if (values.from) params.set("created_after", String(new Date(values.from).getTime() / 1000));
  if (values.to) params.set("created_before", String(new Date(values.to).getTime() / 1000));
  return params;
}

function statusBadge(run) {
  return el("span", {}, el("span", { class: `status ${run.status}` }, run.status),
    run.error_kind ? el("span", { class: "error-kind", title: "failure kind" }, run.error_kind) : null);
}

function listView() {
  const view = $("#view");
  view.replaceChildren($("#list-view").content.cloneNode(true));
  const saved = JSON.parse(sessionStorage.getItem("agentq.filters") || "{}");
  const inputs = Object.fromEntries(Object.entries(FILTERS).map(([name, id]) => [name, $(`#${id}`)]));
  for (const [name, input] of Object.entries(inputs)) input.value = saved[name] || "";
  // The cursors of the pages before this one: "newer" goes back one, a filter starts over.
  let cursors = [];
  let cursor = null;
  let next = null;
  async function refresh() {
    const values = Object.fromEntries(Object.entries(inputs).map(([name, input]) => [name, input.value]));
    const params = listQuery(values);
    if (cursor) params.set("cursor", cursor);
    try {
      const page = await api(`/v1/runs?${params}`);
      const rows = page.runs.map((run) =>
        el("tr", { "data-run-id": run.id, tabindex: "0",
          onclick: () => { location.hash = `#/runs/${encodeURIComponent(run.id)}`; },
          onkeydown: (e) => { if (e.key === "Enter") location.hash = `#/runs/${encodeURIComponent(run.id)}`; } },
          el("td", { class: "id" }, run.id,
            run.parent ? el("span", { class: "muted", title: "a sub-agent's run" }, ` ↰ ${run.parent}`) : null),
          el("td", {}, statusBadge(run)),
          el("td", {}, run.model),
          el("td", {}, run.step + (run.status === "running" || run.status === "awaiting" ? "…" : "")),
          el("td", {}, run.total_tokens),
          el("td", {}, age(run.created_at))));
      $("#runs tbody").replaceChildren(...rows);
      next = page.next_cursor;
      $("#runs-empty").hidden = rows.length > 0;
      $("#runs-empty").textContent = cursor || next ? "No runs here match: try older ones." : "No runs yet.";
      $("#page-older").disabled = !next;
      $("#page-newer").disabled = cursors.length === 0;
      $("#page-number").textContent = `page ${cursors.length + 1}`;
    } catch (err) {
      $("#runs-empty").hidden = false;
      $("#runs-empty").textContent = err.message;
    }
  }
  const restart = () => {
    sessionStorage.setItem("agentq.filters",
      JSON.stringify(Object.fromEntries(Object.entries(inputs).map(([name, input]) => [name, input.value]))));
    cursors = []; cursor = null;
    refresh();
  };
  for (const input of Object.values(inputs)) input.onchange = restart;
  $("#filters").onsubmit = (e) => { e.preventDefault(); restart(); };
  $("#page-older").onclick = () => { if (next) { cursors.push(cursor); cursor = next; refresh(); } };
  $("#page-newer").onclick = () => { if (cursors.length) { cursor = cursors.pop(); refresh(); } };
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => clearInterval(timer);
}

// -- a run -------------------------------------------------------------------

class RunState {
  constructor(id) {
    this.id = id;
    this.events = [];
    this.steps = new Map(); // step -> {start, end, text, reasoning, failed, calls: [ids]}
    this.calls = new Map(); // call id -> {name, step, input, inputText, start, end, output, error, errorKind, waits: []}
    this.children = {}; // call id -> child run id (the run's result)
    this.status = "running";
    this.ended = null;
    this.lastStep = 0;
  }
  step(n) {
    if (!this.steps.has(n)) {
      this.steps.set(n, { start: null, end: null, text: "", reasoning: "", failed: null, copied: false, attempt: 1, calls: [] });
    }
    this.lastStep = Math.max(this.lastStep, n);
    return this.steps.get(n);
  }
  // A step re-delivered after its worker died streams its text again as a later attempt:
  // the step's text starts over, and a late delta of the attempt it replaced is dropped.
  attempt(s, n = 1) {
    if (n > s.attempt) { s.attempt = n; s.text = ""; s.reasoning = ""; }
    return n === s.attempt;
  }
  call(ev) {
    if (!this.calls.has(ev.tool_call_id)) {
      this.calls.set(ev.tool_call_id, { name: ev.tool_name, step: ev.step, input: null, inputText: "", start: ev.at,
        end: null, output: undefined, error: undefined, progress: [], waits: [] });
      this.step(ev.step).calls.push(ev.tool_call_id);
    }
    return this.calls.get(ev.tool_call_id);
  }
  // A fork's steps before its fork step are the original's, recorded: they have no events
  // here, so they are drawn from the result (in the steps, not on the timeline).
  copied(result) {
    for (const recorded of result.steps.filter((r) => r.index < result.origin.step)) {
      const s = this.step(recorded.index);
      if (s.copied) continue;
      Object.assign(s, { copied: true, text: recorded.text });
      for (const call of recorded.tool_calls) {
        const c = this.call({ tool_call_id: call.id, tool_name: call.name, step: recorded.index, at: null });
        c.input = call.input;
        const out = recorded.tool_results.find((r) => r.tool_call_id === call.id);
        if (out && out.is_error) { c.error = out.output; c.errorKind = out.error_kind; } else if (out) c.output = out.output;
      }
    }
  }
  add(ev) {
    this.events.push(ev);
    switch (ev.type) {
      case "start": this.model = ev.model; this.startAt = ev.at; break;
      case "start-step": { const s = this.step(ev.step); if (s.start === null) s.start = ev.at; this.attempt(s, ev.attempt); break; }
      case "text-delta": { const s = this.step(ev.step); if (this.attempt(s, ev.attempt)) s.text += ev.delta; break; }
      case "reasoning-delta": { const s = this.step(ev.step); if (this.attempt(s, ev.attempt)) s.reasoning += ev.delta; break; }
      // The call's arguments as the model writes them, before its tool-call event.
      case "tool-input-start": this.call(ev); break;
      case "tool-input-delta": { const c = this.calls.get(ev.tool_call_id); if (c) c.inputText += ev.delta; break; }
      case "finish-step": { const s = this.step(ev.step); s.end = ev.at; if (typeof ev.text === "string") s.text = ev.text; break; }
      case "tool-call": { const c = this.call(ev); c.input = ev.input; c.start = ev.at; c.provider = !!ev.provider_executed; break; }
      case "tool-approval-request": case "tool-input-request": this.call(ev).waits.push({ start: ev.at, end: null }); break;
      case "tool-approval-response": case "tool-input-response": {
        const open = this.call(ev).waits.find((w) => w.end === null);
        if (open) open.end = ev.at;
        break;
      }
      case "tool-running": this.call(ev).running = ev.at; break;
      case "tool-progress": { const c = this.call(ev); c.progress.push(ev.output); workflowProgress(c, ev.output); break; }
      case "tool-result": { const c = this.call(ev); c.output = ev.output; c.end = ev.at; break; }
      case "tool-error": { const c = this.call(ev); c.error = ev.error; c.errorKind = ev.kind; c.end = ev.at; break; }
      case "finish": this.ended = ev.at; this.status = "succeeded"; break;
      case "error": {
        this.ended = ev.at; this.status = "failed"; this.error = ev.error;
        // The step the run failed in ends there, failed (a failure before any step has none).
        const n = ev.error && Number.isInteger(ev.error.step) ? ev.error.step : this.lastStep;
        const s = this.steps.get(n);
        if (s) { s.failed = { kind: ev.error && ev.error.type, message: ev.error && ev.error.message }; s.end = s.end || ev.at; }
        break;
      }
      case "abort": this.ended = ev.at; this.status = "cancelled"; break;
    }
  }
}

// -- a workflow call's nodes ---------------------------------------------------

// A workflow call's progress (workers/tools/workflow.py): its graph's outline first (every
// node waits), then each node's start ("running") and end ("done" with its output,
// "failed" with its error, or "skipped").
function workflowProgress(call, p) {
  if (!p || typeof p !== "object") return;
  if (Array.isArray(p.nodes) && Array.isArray(p.edges)) {
    call.workflow = { edges: p.edges, nodes: new Map(p.nodes.map((n) => [n.id, { kind: n.kind, status: "waiting" }])) };
  } else if (typeof p.node === "string" && typeof p.status === "string") {
    call.workflow = call.workflow || { edges: [], nodes: new Map() }; // a run from before outlines
    const node = call.workflow.nodes.get(p.node) || { kind: "" };
    call.workflow.nodes.set(p.node, { ...node, status: p.status, output: p.output, error: p.error });
  }
}

// The nodes in layers, each one below its deepest predecessor (the outline lists
// predecessors first), so the graph reads top to bottom and parallel branches side by side.
function layers(workflow) {
  const depth = new Map();
  const rows = [];
  for (const id of workflow.nodes.keys()) {
    const d = Math.max(-1, ...workflow.edges.filter((e) => e[1] === id).map((e) => depth.get(e[0]) ?? -1)) + 1;
    depth.set(id, d);
    (rows[d] = rows[d] || []).push(id);
  }
  return rows.filter(Boolean);
}

function renderWorkflow(call) {
  const ended = call.end !== null;
  return el("div", { class: "workflow" }, layers(call.workflow).map((ids) => el("div", { class: "layer" }, ids.map((id) => {
    const node = call.workflow.nodes.get(id);
    // Once the call has answered (a node failed, or the output is in), nothing more runs.
    const state = !ended ? node.status : node.status === "waiting" ? "not-run" : node.status === "running" ? "stopped" : node.status;
    const from = call.workflow.edges.filter((e) => e[1] === id).map((e) => (e[2] ? `${e[0]} (${e[2]})` : e[0]));
    return el("div", { class: `node ${state}`, "data-node": id, "data-state": state },
      el("div", {}, el("span", { class: "node-id" }, id), " ", el("span", { class: "muted" }, node.kind),
        el("span", { class: "node-state" }, state.replace("-", " "))),
      from.length ? el("div", { class: "muted from" }, `← ${from.join(", ")}`) : null,
      // On one line where it fits: a box is narrow, and a graph reads better short.
      node.status === "done" ? el("pre", { class: "output" }, typeof node.output === "string" ? node.output
        : JSON.stringify(node.output === undefined ? null : node.output)) : null,
      node.error !== undefined ? el("pre", { class: "error" }, node.error) : null);
  }))));
}

function renderTimeline(state) {
  const now = Date.now() / 1000;
  const t0 = state.startAt || (state.events[0] && state.events[0].at) || now;
  const t1 = state.ended || Math.max(now, t0 + 0.001);
  const span = Math.max(t1 - t0, 0.001);
  const pct = (t) => `${(((t - t0) / span) * 100).toFixed(3)}%`;
  const width = (a, b) => `${Math.max(((b - a) / span) * 100, 0.3).toFixed(3)}%`;
  const rows = [];
  for (const [n, step] of [...state.steps.entries()].sort((a, b) => a[0] - b[0])) {
    if (step.start === null) continue;
    const end = step.end || (state.ended || now);
    const failed = step.failed ? ` · failed (${step.failed.kind})` : "";
    rows.push(el("div", { class: "row", "data-kind": "model", "data-step": n, "data-state": step.failed ? "failed" : step.end ? "done" : "running" },
      el("span", { class: "label" }, `step ${n} · ${(end - step.start).toFixed(2)} s${failed}`),
      el("div", { class: `bar ${step.failed ? "error" : "model"}${step.end ? "" : " open"}`, style: `left:${pct(step.start)};width:${width(step.start, end)}` })));
    for (const id of step.calls) {
      const call = state.calls.get(id);
      const end = call.end || (state.ended || now);
      const bars = [el("div", { class: `bar ${call.error !== undefined ? "error" : "tool"}${call.end ? "" : " open"}`,
        style: `left:${pct(call.start)};width:${width(call.start, end)}` })];
      for (const wait of call.waits) {
        const wEnd = wait.end || (state.ended || now);
        bars.push(el("div", { class: `bar wait${wait.end ? "" : " open"}`, style: `left:${pct(wait.start)};width:${width(wait.start, wEnd)}` }));
      }
      const waited = call.waits.reduce((sum, w) => sum + ((w.end || state.ended || now) - w.start), 0);
      const label = `${call.name} · ${(end - call.start).toFixed(2)} s` + (waited ? ` (${waited.toFixed(2)} s waiting)` : "");
      rows.push(el("div", { class: "row", "data-kind": "call", "data-call-id": id },
        el("span", { class: "label" }, label), ...bars));
    }
  }
  $("#timeline").replaceChildren(...rows);
}

function renderSteps(state) {
  const blocks = [];
  for (const [n, step] of [...state.steps.entries()].sort((a, b) => a[0] - b[0])) {
    const calls = step.calls.map((id) => {
      const c = state.calls.get(id);
      const child = state.children[id];
      return el("div", { class: "call", "data-call-id": id },
        el("span", { class: "name" }, c.name), " ", el("span", { class: "muted" }, id),
        child ? el("a", { class: "child-link", href: `#/runs/${encodeURIComponent(child)}`, "data-child": child }, ` → child run ${child}`) : null,
        c.input === null && c.inputText ? el("pre", { class: "streaming" }, `input (streaming): ${c.inputText}`)
          : el("pre", {}, `input: ${json(c.input)}`),
        c.workflow ? renderWorkflow(c)
          : c.progress.length ? el("pre", {}, `progress: ${json(c.progress[c.progress.length - 1])}`) : null,
        c.output !== undefined ? el("pre", { class: "output" }, `output: ${json(c.output)}`) : null,
        // The kind says who must act (no-such-tool, invalid-input, timeout, denied, ...).
        c.error !== undefined ? el("pre", { class: "error", "data-error-kind": c.errorKind },
          c.errorKind ? el("span", { class: "error-kind" }, c.errorKind) : null, `error: ${json(c.error)}`) : null);
    });
    const title = step.copied ? `step ${n} · copied from ${state.origin}` : `step ${n}`;
    blocks.push(el("div", { class: `step${step.failed ? " failed" : ""}${step.copied ? " copied" : ""}`, "data-step": n }, el("h3", {}, title),
      step.reasoning ? el("details", { class: "reasoning", open: "" }, el("summary", {}, "reasoning"),
        el("pre", {}, step.reasoning)) : null,
      step.text ? el("p", { class: "text" }, step.text) : null, ...calls,
      step.failed ? el("pre", { class: "error step-error", "data-error-kind": step.failed.kind },
        el("span", { class: "error-kind" }, step.failed.kind), step.failed.message) : null));
  }
  $("#steps").replaceChildren(...blocks);
}

function renderPending(state, result) {
  const items = (result.pending || []).map((p) => {
    const base = `/v1/runs/${encodeURIComponent(state.id)}`;
    if (p.status === "awaiting-approval") {
      const reason = el("input", { class: "reason", placeholder: "reason (shown to the model on a denial)" });
      const send = (approved) => api(`${base}/calls/${encodeURIComponent(p.tool_call_id)}/approval`,
        { method: "POST", body: JSON.stringify({ approved, reason: reason.value || null }) }).then(refreshResult, alert);
      return el("div", { class: "item", "data-call-id": p.tool_call_id },
        el("div", {}, "Approve ", el("b", {}, p.tool_name), "?"), el("pre", {}, json(p.input)),
        el("button", { class: "approve", "data-call-id": p.tool_call_id, onclick: () => send(true) }, "Approve"), " ",
        el("button", { class: "deny", "data-call-id": p.tool_call_id, onclick: () => send(false) }, "Deny"), " ", reason);
    }
    if (p.status === "awaiting-result") {
      const output = el("textarea", { placeholder: "output as JSON" });
      const post = (is_error) => {
        let value = output.value;
        try { value = JSON.parse(value); } catch (_) { /* plain text */ }
        api(`${base}/calls/${encodeURIComponent(p.tool_call_id)}/result`,
          { method: "POST", body: JSON.stringify({ output: value, is_error }) }).then(refreshResult, alert);
      };
      return el("div", { class: "item", "data-call-id": p.tool_call_id },
        el("div", {}, "Client tool ", el("b", {}, p.tool_name), " waits for its output"), el("pre", {}, json(p.input)),
        output, el("button", { class: "post-result", onclick: () => post(false) }, "Send output"), " ",
        el("button", { onclick: () => post(true) }, "Send as error"));
    }
    if (p.status === "awaiting-input") {
      const answer = el("textarea", { placeholder: "answer as a JSON object" });
      const send = (decline) => {
        let body;
        try { body = decline ? { decline: true } : { answer: JSON.parse(answer.value || "{}") }; }
        catch (err) { alert(`not JSON: ${err.message}`); return; }
        api(`${base}/input-requests/${encodeURIComponent(p.request_id)}`, { method: "POST", body: JSON.stringify(body) })
          .then(refreshResult, alert);
      };
      return el("div", { class: "item", "data-request-id": p.request_id },
        el("div", {}, el("b", {}, p.tool_name), " asks: ", p.message), el("pre", {}, json(p.schema)),
        answer, el("button", { class: "answer", onclick: () => send(false) }, "Answer"), " ",
        el("button", { onclick: () => send(true) }, "Decline"));
    }
    return el("div", { class: "item" }, json(p));
  });
  $("#pending").hidden = items.length === 0;
  $("#pending-items").replaceChildren(...items);
}

let refreshResult = () => {};

const EVENT_TYPES = ["start", "start-step", "model-retry", "text-delta", "reasoning-delta", "tool-input-start",
  "tool-input-delta", "finish-step", "context-compacted", "tool-call", "tool-call-repair", "tool-approval-request",
  "tool-approval-response", "tool-input-request", "tool-input-response", "tool-running", "tool-progress", "tool-log",
  "tool-result", "tool-error", "guardrail-tripped", "finish", "error", "abort", "webhook-failed"];
const DELTAS = new Set(["text-delta", "reasoning-delta", "tool-input-delta"]);

function runLink(runId, text) {
  return el("a", { href: `#/runs/${encodeURIComponent(runId)}` }, text);
}

// Where the run comes from: the parent run whose call started it, the run it forks or retries.
function renderLinks(result) {
  const links = [];
  if (result.parent) {
    links.push(el("span", { class: "parent-link" }, "sub-agent of ", runLink(result.parent.run_id, result.parent.run_id),
      ` (step ${result.parent.step}, call ${result.parent.call_id})`));
  }
  if (result.origin) {
    links.push(el("span", { class: "origin-link" }, result.origin.step ? "forked from " : "retry of ",
      runLink(result.origin.run_id, result.origin.run_id), result.origin.step ? ` at step ${result.origin.step}` : ""));
  }
  $("#run-links").replaceChildren(...links.flatMap((l, i) => (i ? [" · ", l] : [l])));
  $("#run-links").hidden = links.length === 0;
}

function renderForkSteps(result) {
  // A fork at step N copies steps 0..N-1 as recorded: any step the run has recorded.
  const select = $("#fork-step");
  const last = Math.max(0, result.steps.length - 1);
  if (select.options.length === last + 1) return;
  const chosen = select.value;
  select.replaceChildren(...Array.from({ length: last + 1 }, (_, n) => el("option", { value: String(n) }, String(n))));
  select.value = chosen && Number(chosen) <= last ? chosen : String(last);
}

function renderReplay(report) {
  const box = $("#replay-report");
  box.hidden = false;
  box.dataset.diverged = String(report.diverged);
  box.replaceChildren(
    el("div", {}, report.diverged ? `${report.divergences.length} divergence(s) over ${report.steps} steps`
      : `${report.steps} steps replayed: same messages and path`),
    ...report.divergences.map((d) => el("div", { class: "divergence", "data-step": String(d.step) },
      el("b", {}, `step ${d.step}: ${d.what}`), el("pre", {}, `recorded: ${json(d.recorded)}\ntoday:    ${json(d.today)}`))));
}

function runActions(runId) {
  const base = `/v1/runs/${encodeURIComponent(runId)}`;
  const note = (text) => { $("#action-note").textContent = text; };
  const start = (path, body) => api(`${base}/${path}`, { method: "POST", body: JSON.stringify(body) })
    .then((started) => { location.hash = `#/runs/${encodeURIComponent(started.id)}`; }, (err) => note(err.message));
  $("#run-cancel").onclick = () => api(`${base}/cancel`, { method: "POST", body: "{}" })
    .then((r) => { note(r.outcome); refreshResult(); }, (err) => note(err.message));
  $("#run-retry").onclick = () => start("retry", {});
  $("#run-fork").onclick = () => { $("#fork-form").hidden = false; $("#fork-patch").focus(); };
  $("#fork-close").onclick = () => { $("#fork-form").hidden = true; };
  $("#fork-start").onclick = () => {
    let patch = null;
    const text = $("#fork-patch").value.trim();
    try { if (text) patch = JSON.parse(text); } catch (err) { note(`patch is not JSON: ${err.message}`); return; }
    start("fork", { at_step: Number($("#fork-step").value || 0), patch });
  };
  $("#run-replay").onclick = () => {
    note("replaying…");
    api(`${base}/replay`, { method: "POST", body: "{}" }).then((report) => { note(""); renderReplay(report); },
      (err) => note(err.message));
  };
}

function runView(runId) {
  const view = $("#view");
  view.replaceChildren($("#run-view").content.cloneNode(true));
  $("#run-id").textContent = runId;
  const state = new RunState(runId);
  let frame = 0;
  let closed = false;
  // Left for another view: a request or a frame still out must not draw into the next
  // view, whose elements have the same ids (another run's page above all).
  let left = false;
  const draw = () => {
    frame = 0;
    if (left) return;
    renderTimeline(state);
    renderSteps(state);
    if (!$("#raw").hidden) $("#raw-events").textContent = state.events.map((e) => JSON.stringify(e)).join("\n");
  };
  const schedule = () => { if (!frame) frame = requestAnimationFrame(draw); };
  runActions(runId);
  $("#run-raw").onclick = () => {
    $("#raw").hidden = !$("#raw").hidden;
    $("#run-raw").setAttribute("aria-expanded", String(!$("#raw").hidden));
    schedule();
  };
  let pendingTimer = 0;
  refreshResult = async () => {
    try {
      const result = await api(`/v1/runs/${encodeURIComponent(runId)}`);
      if (left) return;
      $("#run-status").textContent = result.status;
      $("#run-status").className = `status ${result.status}`;
      $("#run-usage").textContent = `${result.usage.total_tokens} tokens · ${result.steps.length} steps`;
      if (result.error) {
        $("#run-error").hidden = false;
        $("#run-error").replaceChildren(el("span", { class: "error-kind" }, result.error.type), result.error.message);
      }
      $("#run-cancel").hidden = !(result.status === "running" || result.status === "awaiting");
      renderLinks(result);
      renderForkSteps(result);
      state.children = result.children || {};
      if (result.origin && result.origin.step > 0) { state.origin = result.origin.run_id; state.copied(result); }
      renderPending(state, result);
      schedule();
    } catch (err) {
      if (!left) $("#run-status").textContent = err.message;
    }
  };
  const soon = () => { clearTimeout(pendingTimer); pendingTimer = setTimeout(refreshResult, 150); };
  // EventSource resumes with Last-Event-ID on its own after a dropped connection; the
  // session cookie authenticates it (it cannot send headers).
  const source = new EventSource(`/v1/runs/${encodeURIComponent(runId)}/events`);
  const onEvent = (msg) => {
    // The browser's own `error` (a dropped connection) carries no data; the run's
    // `error` event does.
    if (msg.data === undefined) return;
    const ev = JSON.parse(msg.data);
    state.add(ev);
    if (ev.type === "start") $("#run-model").textContent = ev.model;
    if (!DELTAS.has(ev.type)) soon();
    if (TERMINAL.has(ev.type)) { closed = true; source.close(); }
    schedule();
  };
  for (const type of EVENT_TYPES) source.addEventListener(type, onEvent);
  source.onerror = () => { if (closed) source.close(); };
  refreshResult();
  const ticker = setInterval(() => { if (!state.ended) schedule(); }, 500);
  return () => {
    left = true;
    closed = true;
    source.close();
    cancelAnimationFrame(frame);
    clearInterval(ticker);
    clearTimeout(pendingTimer);
  };
}

// -- batches -------------------------------------------------------------------

// The ended lines' share of the bar, split by outcome: succeeded, failed, cancelled.
function paintFill(fill, info) {
  const c = info.counts;
  const ended = c.succeeded + c.failed + c.cancelled;
  const ok = ended ? (100 * c.succeeded) / ended : 0;
  const bad = ended ? ok + (100 * c.failed) / ended : 0;
  fill.style.width = `${info.lines ? (100 * ended) / info.lines : 0}%`;
  fill.style.background = `linear-gradient(to right, var(--done) 0 ${ok}%, var(--error) ${ok}% ${bad}%, var(--muted) ${bad}% 100%)`;
  fill.parentElement.setAttribute("aria-valuenow", String(Math.round(info.lines ? (100 * ended) / info.lines : 0)));
}

function progressBar(info) {
  const fill = el("div", { class: "fill" });
  const bar = el("div", { class: "progress", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100" }, fill);
  paintFill(fill, info);
  return bar;
}

function batchesView() {
  const view = $("#view");
  view.replaceChildren($("#batches-view").content.cloneNode(true));
  async function refresh() {
    try {
      const batches = await api("/v1/batches");
      $("#batches-empty").hidden = batches.length > 0;
      $("#batches tbody").replaceChildren(...batches.map((b) => {
        const c = b.counts;
        return el("tr", { "data-batch-id": b.id, onclick: () => { location.hash = `#/batches/${encodeURIComponent(b.id)}`; } },
          el("td", { class: "id" }, b.id),
          el("td", {}, el("span", { class: `status ${b.status}` }, b.status)),
          el("td", {}, progressBar(b)),
          el("td", { class: "ended" }, `${c.succeeded + c.failed + c.cancelled} / ${b.lines}`),
          el("td", { class: "failed" }, String(c.failed)),
          el("td", {}, b.runs_per_s ? b.runs_per_s.toFixed(1) : "-"),
          el("td", {}, age(b.created_at)));
      }));
    } catch (err) {
      $("#batches-empty").hidden = false;
      $("#batches-empty").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 1000);
  return () => clearInterval(ticker);
}

function schedulesView() {
  const view = $("#view");
  view.replaceChildren($("#schedules-view").content.cloneNode(true));
  async function refresh() {
    try {
      const schedules = await api("/v1/schedules");
      $("#schedules-empty").hidden = schedules.length > 0;
      $("#schedules tbody").replaceChildren(...schedules.map((s) => {
        const path = `/v1/schedules/${encodeURIComponent(s.name)}`;
        const toggle = s.paused ? "resume" : "pause";
        return el("tr", { "data-schedule": s.name },
          el("td", { class: "id" }, s.name),
          el("td", { class: "cron" }, s.cron),
          el("td", {}, s.tz),
          el("td", { class: "next" }, s.paused ? "paused" : new Date(s.next_tick_at * 1000).toLocaleString()),
          el("td", { class: "fired" }, String(s.fired)),
          el("td", { class: "skipped" }, String(s.skipped)),
          el("td", { class: "id" }, s.last_run ? el("a", { href: `#/runs/${encodeURIComponent(s.last_run)}` }, s.last_run) : "-"),
          el("td", {}, el("button", { class: toggle, onclick: () => api(`${path}/${toggle}`, { method: "POST" }).then(refresh) }, toggle)));
      }));
    } catch (err) {
      $("#schedules-empty").hidden = false;
      $("#schedules-empty").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 1000);
  return () => clearInterval(ticker);
}

function batchView(batchId) {
  const view = $("#view");
  view.replaceChildren($("#batch-view").content.cloneNode(true));
  const path = `/v1/batches/${encodeURIComponent(batchId)}`;
  $("#batch-id").textContent = batchId;
  // As in runView: a response after leaving must not draw into the next view.
  let left = false;
  const note = (text) => { $("#batch-note").textContent = text; };
  $("#batch-cancel").onclick = () => api(`${path}/cancel`, { method: "POST" })
    .then((b) => { note(`cancelled: ${b.counts.running} running line(s) being cancelled`); refresh(); }, (err) => note(err.message));
  $("#batch-retry").onclick = () => api(`${path}/retry?failed=true`, { method: "POST" })
    .then((r) => { note(`${r.requeued} failed line(s) requeued as new runs`); refresh(); }, (err) => note(err.message));
  async function failures() {
    const response = await fetch(`${path}/results?failed=true`);
    const text = await response.text();
    if (left) return;
    const rows = text.split("\n").filter(Boolean).slice(0, 200).map((l) => JSON.parse(l));
    $("#failures-empty").hidden = rows.length > 0;
    $("#batch-failures tbody").replaceChildren(...rows.map((r) => el("tr", { "data-line": String(r.line) },
      el("td", {}, String(r.line)),
      el("td", { class: "id" }, r.custom_id),
      el("td", { class: "id" }, r.run_id ? el("a", { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.run_id) : "-"),
      el("td", { class: "error" }, r.error || ""))));
  }
  async function refresh() {
    try {
      const b = await api(path);
      if (left) return;
      const c = b.counts;
      $("#batch-status").textContent = b.status;
      $("#batch-status").className = `status ${b.status}`;
      paintFill($("#batch-bar"), b);
      // Only a batch still admitting can be cancelled; only failed lines can be retried.
      $("#batch-cancel").hidden = !(b.status === "running" || b.status === "uploading");
      $("#batch-retry").disabled = c.failed === 0;
      const eta = b.eta_s === null ? "-" : `${Math.round(b.eta_s)} s`;
      $("#batch-counts").textContent = `${c.succeeded} succeeded · ${c.failed} failed · ${c.cancelled} cancelled · ` +
        `${c.running} running · ${c.queued} queued of ${b.lines} · ${b.runs_per_s ? b.runs_per_s.toFixed(1) : "-"} runs/s · ` +
        `ETA ${eta} · ${b.usage.total_tokens} tokens`;
      await failures();
    } catch (err) {
      if (!left) $("#batch-counts").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 1500);
  return () => { left = true; clearInterval(ticker); };
}

// -- workers -------------------------------------------------------------------

function workersView() {
  const view = $("#view");
  view.replaceChildren($("#workers-view").content.cloneNode(true));
  async function refresh() {
    try {
      const workers = await api("/v1/workers");
      $("#workers-empty").hidden = workers.length > 0;
      $("#workers-empty").textContent = "No worker alive.";
      $("#workers tbody").replaceChildren(...workers.map((w) => el("tr", { "data-worker-id": w.id },
        el("td", { class: "host" }, w.host),
        el("td", { class: "pid" }, String(w.pid)),
        el("td", { class: "queues" }, w.queues.join(", ")),
        el("td", { class: "tools" }, w.tools.join(", ") || "-"),
        // As of its last beat: a worker reports what it runs only when it beats.
        el("td", { class: "in-flight" }, `${w.jobs_in_flight} / ${w.concurrency}`),
        el("td", { class: "seen" }, `${age(w.seen_at)} ago`),
        el("td", { class: "up" }, age(w.started_at)))));
    } catch (err) {
      $("#workers-empty").hidden = false;
      $("#workers-empty").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 2000);
  return () => clearInterval(ticker);
}

// -- routing -------------------------------------------------------------------

function route() {
  stopView();
  const run = location.hash.match(/^#\/runs\/(.+)$/);
  const batch = location.hash.match(/^#\/batches\/(.+)$/);
  if (run) stopView = runView(decodeURIComponent(run[1]));
  else if (batch) stopView = batchView(decodeURIComponent(batch[1]));
  else if (location.hash === "#/batches") stopView = batchesView();
  else if (location.hash === "#/schedules") stopView = schedulesView();
  else if (location.hash === "#/workers") stopView = workersView();
  else stopView = listView();
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  const input = $("#api-key");
  input.onchange = async () => {
    const key = input.value.trim();
    const ok = await signIn(key);
    input.value = "";
    input.placeholder = !key ? "signed out" : ok ? "signed in" : "key refused";
    route();
    refreshFleet();
  };
  route();
  refreshFleet();
  setInterval(refreshFleet, 3000);
});
