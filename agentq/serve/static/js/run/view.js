// The run page: its live events, what it waits for, its links and actions.

import { $, api, el, json, runLink, usd } from "../shared.js";
import { renderSteps, renderTimeline } from "./draw.js";
import { drawPending } from "./pending.js";
import { drawSlot } from "./slot.js";
import { RunState } from "./state.js";

const TERMINAL = new Set(["finish", "error", "abort"]);

// Tokens and cost: the run's own steps', then its sub-agents' (their runs' own pages).
function usageLine(result) {
  const own = `${result.usage.total_tokens} tokens · ${usd(result.usage.cost_usd)} · ${result.steps.length} steps`;
  const kids = result.child_usage;
  if (!kids || kids.total_tokens === 0) return own;
  return `${own} · sub-agents: ${kids.total_tokens} tokens · ${usd(kids.cost_usd)}`;
}

let refreshResult = () => {};

const EVENT_TYPES = ["start", "start-step", "model-retry", "text-delta", "reasoning-delta", "tool-input-start",
  "tool-input-delta", "finish-step", "context-compacted", "tool-call", "tool-call-repair", "tool-approval-request",
  "tool-approval-response", "tool-input-request", "tool-input-response", "tool-running", "tool-progress", "tool-log",
  "tool-result", "tool-error", "guardrail-tripped", "finish", "error", "abort", "webhook-failed"];
const DELTAS = new Set(["text-delta", "reasoning-delta", "tool-input-delta"]);

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

export function runView(runId) {
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
  let slotTimer = 0;
  refreshResult = async () => {
    try {
      const result = await api(`/v1/runs/${encodeURIComponent(runId)}`);
      if (left) return;
      $("#run-status").textContent = result.status;
      $("#run-status").className = `status ${result.status}`;
      $("#run-usage").textContent = usageLine(result);
      if (result.error) {
        $("#run-error").hidden = false;
        $("#run-error").replaceChildren(el("span", { class: "error-kind" }, result.error.type), result.error.message);
      }
      $("#run-cancel").hidden = !(result.status === "running" || result.status === "awaiting");
      renderLinks(result);
      drawSlot(result);
      // A run waiting for a slot sends no event until it has one: asked again meanwhile.
      clearTimeout(slotTimer);
      if (result.concurrency && result.concurrency.in_use !== null) slotTimer = setTimeout(refreshResult, 2000);
      renderForkSteps(result);
      state.children = result.children || {};
      if (result.origin && result.origin.step > 0) { state.origin = result.origin.run_id; state.copied(result); }
      drawPending(state, result, refreshResult);
      schedule();
    } catch (err) {
      if (left) return;
      $("#run-status").textContent = err.message;
      // A run named before it exists (a schedule's tick records its run first, a thread
      // queues its next turn) is looked up again until it does.
      if (err.status === 404) { clearTimeout(pendingTimer); pendingTimer = setTimeout(refreshResult, 1000); }
    }
  };
  const soon = () => { clearTimeout(pendingTimer); pendingTimer = setTimeout(refreshResult, 150); };
  // EventSource resumes with Last-Event-ID on its own after a dropped connection; the
  // session cookie authenticates it (it cannot send headers). A stream refused outright
  // (the run does not exist yet) is not retried by the browser: it is followed again
  // shortly, from the last event seen.
  let source = null;
  let lastSeq = null;
  let followTimer = 0;
  const onEvent = (msg) => {
    // The browser's own `error` (a dropped connection) carries no data; the run's
    // `error` event does.
    if (msg.data === undefined) return;
    const ev = JSON.parse(msg.data);
    if (msg.lastEventId) lastSeq = msg.lastEventId;
    state.add(ev);
    if (ev.type === "start") $("#run-model").textContent = ev.model;
    if (!DELTAS.has(ev.type)) soon();
    if (TERMINAL.has(ev.type)) { closed = true; source.close(); }
    schedule();
  };
  const follow = () => {
    const after = lastSeq === null ? "" : `?after=${lastSeq}`;
    source = new EventSource(`/v1/runs/${encodeURIComponent(runId)}/events${after}`);
    for (const type of EVENT_TYPES) source.addEventListener(type, onEvent);
    source.onerror = () => {
      if (closed) source.close();
      else if (source.readyState === EventSource.CLOSED) followTimer = setTimeout(follow, 1000);
    };
  };
  follow();
  refreshResult();
  const ticker = setInterval(() => { if (!state.ended) schedule(); }, 500);
  return () => {
    left = true;
    closed = true;
    source.close();
    cancelAnimationFrame(frame);
    clearInterval(ticker);
    clearTimeout(pendingTimer);
    clearTimeout(slotTimer);
    clearTimeout(followTimer);
  };
}
