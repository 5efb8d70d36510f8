// The threads list (the caller's tenant's, the most recently started first) and a thread's
// page: its messages, its runs with their status and cost.

import { $, age, api, el, json, runLink, usd } from "./shared.js";

export function threadsView() {
  const view = $("#view");
  view.replaceChildren($("#threads-view").content.cloneNode(true));
  // As in runView: a response after leaving must not draw into the next view.
  let left = false;
  async function refresh() {
    try {
      const { threads } = await api("/v1/threads?limit=200");
      if (left) return;
      $("#threads-empty").hidden = threads.length > 0;
      $("#threads-empty").textContent = "No threads yet.";
      $("#threads tbody").replaceChildren(...threads.map((t) => {
        const open = () => { location.hash = `#/threads/${encodeURIComponent(t.id)}`; };
        return el("tr", { "data-thread-id": t.id, tabindex: "0", onclick: open, onkeydown: (e) => { if (e.key === "Enter") open(); } },
          el("td", { class: "id" }, t.id),
          el("td", {}, el("span", { class: `status ${t.status}` }, t.status)),
          el("td", { class: "id current" }, t.current_run || "-"),
          el("td", {}, `${age(t.updated_at)} ago`),
          el("td", {}, `${age(t.created_at)} ago`));
      }));
    } catch (err) {
      if (left) return;
      $("#threads-empty").hidden = false;
      $("#threads-empty").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 2000);
  return () => { left = true; clearInterval(ticker); };
}

// One part of a message as a line: text as it is, a call and a result by their tool.
function part(p) {
  if (typeof p === "string") return p;
  if (p.type === "text") return p.text;
  if (p.type === "tool-call") return `→ ${p.tool_name}(${JSON.stringify(p.input)})`;
  if (p.type === "tool-result") return `← ${p.tool_name}: ${typeof p.output === "string" ? p.output : JSON.stringify(p.output)}`;
  return json(p);
}

function message(m) {
  const parts = Array.isArray(m.content) ? m.content : [m.content];
  return el("div", { class: `message ${m.role}`, "data-role": m.role },
    el("span", { class: "role" }, m.role), el("p", { class: "text" }, parts.map(part).join("\n")));
}

// The thread's cost: its runs' (unpriced once a run is).
function total(runs) {
  return runs.reduce((sum, r) => (sum === null || r.cost_usd === null ? null : sum + r.cost_usd), 0);
}

export function threadView(threadId) {
  const view = $("#view");
  view.replaceChildren($("#thread-view").content.cloneNode(true));
  $("#thread-id").textContent = threadId;
  let drawn = "";
  let left = false;
  async function refresh() {
    try {
      const t = await api(`/v1/threads/${encodeURIComponent(threadId)}`);
      if (left) return;
      $("#thread-status").textContent = t.status;
      $("#thread-status").className = `status ${t.status}`;
      const tokens = t.runs.reduce((sum, r) => sum + r.total_tokens, 0);
      $("#thread-usage").textContent = `${t.runs.length} runs · ${tokens} tokens · ${usd(total(t.runs))}` +
        (t.queued.length ? ` · ${t.queued.length} queued` : "") + ` · double texting: ${t.double_texting}`;
      $("#thread-runs tbody").replaceChildren(...t.runs.map((r) => el("tr", { "data-run-id": r.id },
        el("td", { class: "id" }, runLink(r.id, r.id)),
        el("td", {}, el("span", { class: `status ${r.status}` }, r.status)),
        el("td", { class: "tokens" }, String(r.total_tokens)),
        el("td", { class: "cost" }, usd(r.cost_usd)),
        el("td", {}, r.created_at ? `${age(r.created_at)} ago` : "-"))));
      // Redrawn only when they change: a reader's place in a long conversation stays put.
      const text = JSON.stringify(t.messages);
      if (text !== drawn) { drawn = text; $("#thread-messages").replaceChildren(...t.messages.map(message)); }
      $("#thread-error").hidden = true;
    } catch (err) {
      if (left) return;
      $("#thread-error").hidden = false;
      $("#thread-error").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 2000);
  return () => { left = true; clearInterval(ticker); };
}
