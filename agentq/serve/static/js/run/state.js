// A run as its events tell it: steps, calls, waits, a workflow call's nodes.

export class RunState {
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
