// Drawing a run's state: the timeline, the steps, a workflow call's graph.

import { $, el, json } from "../shared.js";

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

export function renderTimeline(state) {
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

export function renderSteps(state) {
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
