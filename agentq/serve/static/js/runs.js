// The runs list: filters kept for the tab, cursor paging, live refresh.

import { $, age, api, el } from "./shared.js";

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

export function listView() {
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
