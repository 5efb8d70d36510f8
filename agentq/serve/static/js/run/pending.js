// What a run waits for from a person: approvals (the call's input editable), client tools'
// outputs and calls' questions. Each is a form kept across the page's redraws, so what is
// typed into one survives the events that keep arriving while it is typed.

import { $, api, el, json } from "../shared.js";

const kept = new WeakMap(); // a run page's state -> its forms by key

function failure(box) {
  return (err) => { box.textContent = err.message; box.hidden = false; };
}

function parsed(text, what, box) {
  try { return { value: JSON.parse(text) }; } catch (err) {
    failure(box)(new Error(`${what} is not JSON: ${err.message}`));
    return null;
  }
}

// Approved as is, or with the input as edited: the server checks it against the tool's
// schema, and a refusal leaves the call waiting with the reason shown here.
function approval(base, p, done) {
  const id = p.tool_call_id;
  const original = JSON.stringify(p.input, null, 2);
  const input = el("textarea", { class: "approve-input", id: `approve-input-${id}`, spellcheck: "false" }, original);
  const reason = el("input", { class: "reason", placeholder: "reason (shown to the model on a denial)", "aria-label": "reason" });
  const error = el("p", { class: "error form-error", role: "alert", hidden: "" });
  const send = (approved) => {
    const body = { approved, reason: reason.value || null };
    if (approved && input.value.trim() !== original.trim()) {
      const edited = parsed(input.value, "the input", error);
      if (!edited) return;
      body.input = edited.value;
    }
    api(`${base}/calls/${encodeURIComponent(id)}/approval`, { method: "POST", body: JSON.stringify(body) })
      .then(done, failure(error));
  };
  return el("div", { class: "item", "data-call-id": id },
    el("div", {}, "Approve ", el("b", {}, p.tool_name), "?"),
    el("label", { for: `approve-input-${id}`, class: "muted" }, "input (JSON: edit it to run the call with another)"),
    input,
    el("button", { class: "approve", "data-call-id": id, onclick: () => send(true) }, "Approve"), " ",
    el("button", { class: "deny", "data-call-id": id, onclick: () => send(false) }, "Deny"), " ", reason, error);
}

function clientResult(base, p, done) {
  const output = el("textarea", { placeholder: "output as JSON (or plain text)", "aria-label": "output" });
  const error = el("p", { class: "error form-error", role: "alert", hidden: "" });
  const post = (is_error) => {
    let value = output.value;
    try { value = JSON.parse(value); } catch (_) { /* plain text */ }
    api(`${base}/calls/${encodeURIComponent(p.tool_call_id)}/result`,
      { method: "POST", body: JSON.stringify({ output: value, is_error }) }).then(done, failure(error));
  };
  return el("div", { class: "item", "data-call-id": p.tool_call_id },
    el("div", {}, "Client tool ", el("b", {}, p.tool_name), " waits for its output"), el("pre", {}, json(p.input)),
    output, el("button", { class: "post-result", onclick: () => post(false) }, "Send output"), " ",
    el("button", { class: "post-error", onclick: () => post(true) }, "Send as error"), error);
}

function question(base, p, done) {
  const answer = el("textarea", { class: "answer-input", placeholder: "answer as a JSON object", "aria-label": "answer" });
  const error = el("p", { class: "error form-error", role: "alert", hidden: "" });
  const send = (decline) => {
    const given = decline ? null : parsed(answer.value || "{}", "the answer", error);
    if (!decline && !given) return;
    api(`${base}/input-requests/${encodeURIComponent(p.request_id)}`,
      { method: "POST", body: JSON.stringify(decline ? { decline: true } : { answer: given.value }) })
      .then(done, failure(error));
  };
  return el("div", { class: "item", "data-request-id": p.request_id },
    el("div", {}, el("b", {}, p.tool_name), " asks: ", p.message), el("pre", {}, json(p.schema)),
    answer, el("button", { class: "answer", onclick: () => send(false) }, "Answer"), " ",
    el("button", { class: "decline", onclick: () => send(true) }, "Decline"), error);
}

const FORMS = { "awaiting-approval": approval, "awaiting-result": clientResult, "awaiting-input": question };

export function drawPending(state, result, done) {
  const forms = kept.get(state) || new Map();
  kept.set(state, forms);
  const base = `/v1/runs/${encodeURIComponent(state.id)}`;
  const items = (result.pending || []).map((p) => {
    const key = `${p.status} ${p.request_id || p.tool_call_id}`;
    if (!forms.has(key)) forms.set(key, FORMS[p.status] ? FORMS[p.status](base, p, done) : el("div", { class: "item" }, json(p)));
    return [key, forms.get(key)];
  });
  for (const key of forms.keys()) if (!items.some(([k]) => k === key)) forms.delete(key);
  $("#pending").hidden = items.length === 0;
  const box = $("#pending-items");
  // Only what changed: a form being typed into keeps its place, its text and its focus.
  if (items.length !== box.children.length || items.some(([, form], i) => box.children[i] !== form)) {
    box.replaceChildren(...items.map(([, form]) => form));
  }
}
