// The runs list: filters kept for the tab, cursor paging, sortable columns, live refresh.

import { $, age, api, el, seconds, usd } from "./shared.js";

// The list's filters, kept for the tab (sessionStorage): a run page and back keeps them.
const FILTERS = { q: "filter-q", status: "filter-status", error_kind: "filter-error-kind", model: "filter-model",
  tool: "filter-tool", meta: "filter-meta", tenant: "filter-tenant", from: "filter-from", to: "filter-to" };
const PAGE_SIZE = 100;

// A live run's duration so far; a delayed run's counts from its start.
const duration = (run) => (run.finished_at || Date.now() / 1000) - (run.start_at || run.created_at);

// What each sortable column sorts by (an unpriced run's cost below every price).
const SORTS = { start: (r) => r.created_at, duration, steps: (r) => r.step, tokens: (r) => r.total_tokens,
  cost: (r) => (r.cost_usd === null ? -1 : r.cost_usd) };

function listQuery(values) {
  const params = new URLSearchParams();
  for (const name of ["q", "status", "error_kind", "model", "tool", "tenant"]) {
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

// A filtered page may come back short with a cursor (a request reads at most the server's
// LIST_SCAN_RUNS runs): the list reads on from it until the page is full or the runs end,
// saying how many it has searched, unless a newer refresh has started meanwhile.
async function readPage(params, from, current, searched) {
  const runs = [];
  let at = from;
  let scanned = 0;
  let requests = 0;
  for (;;) {
    const query = new URLSearchParams(params);
    query.set("limit", String(PAGE_SIZE - runs.length));
    if (at) query.set("cursor", at);
    const page = await api(`/v1/runs?${query}`);
    runs.push(...page.runs);
    scanned += page.scanned;
    requests += 1;
    at = page.next_cursor;
    if (runs.length >= PAGE_SIZE || !at || !current()) return { runs, next: at, scanned, requests };
    searched(scanned);
  }
}

function runRow(run) {
  const open = () => { location.hash = `#/runs/${encodeURIComponent(run.id)}`; };
  return el("tr", { "data-run-id": run.id, tabindex: "0", onclick: open, onkeydown: (e) => { if (e.key === "Enter") open(); } },
    el("td", { class: "id" }, run.id,
      run.parent ? el("span", { class: "muted", title: "a sub-agent's run" }, ` ↰ ${run.parent}`) : null),
    el("td", {}, statusBadge(run)),
    el("td", {}, run.model),
    el("td", { class: "steps" }, run.step + (run.status === "running" || run.status === "awaiting" ? "…" : "")),
    el("td", { class: "tokens" }, run.total_tokens),
    el("td", { class: "cost" }, usd(run.cost_usd)),
    el("td", { class: "start", title: new Date(run.created_at * 1000).toLocaleString() }, `${age(run.created_at)} ago`),
    el("td", { class: "duration" }, seconds(duration(run))));
}

// Sorting orders the page shown (the list pages newest first): a click on a column's
// header sorts by it, largest first, a second click smallest first.
function sortHeaders(sort, changed) {
  for (const th of document.querySelectorAll("#runs th[data-sort]")) {
    const key = th.dataset.sort;
    th.setAttribute("aria-sort", sort.key === key ? (sort.desc ? "descending" : "ascending") : "none");
    th.replaceChildren(el("button", { type: "button", class: "sort",
      onclick: () => changed(sort.key === key ? { key, desc: !sort.desc } : { key, desc: true }) },
    key, sort.key === key ? (sort.desc ? " ▾" : " ▴") : ""));
  }
}

export function listView() {
  const view = $("#view");
  view.replaceChildren($("#list-view").content.cloneNode(true));
  const saved = JSON.parse(sessionStorage.getItem("agentq.filters") || "{}");
  const inputs = Object.fromEntries(Object.entries(FILTERS).map(([name, id]) => [name, $(`#${id}`)]));
  for (const [name, input] of Object.entries(inputs)) input.value = saved[name] || "";
  let sort = JSON.parse(sessionStorage.getItem("agentq.sort") || "null") || { key: null, desc: true };
  // The cursors of the pages before this one: "newer" goes back one, a filter starts over.
  let cursors = [];
  let cursor = null;
  let next = null;
  let shown = [];
  let generation = 0;
  let busy = false;
  let deep = false; // the page took several requests: it is not re-read every 2 s
  function draw() {
    const rows = sort.key ? [...shown].sort((a, b) => (SORTS[sort.key](a) - SORTS[sort.key](b)) * (sort.desc ? -1 : 1)) : shown;
    $("#runs tbody").replaceChildren(...rows.map(runRow));
    sortHeaders(sort, (chosen) => {
      sort = chosen;
      sessionStorage.setItem("agentq.sort", JSON.stringify(sort));
      draw();
      $(`#runs th[data-sort="${sort.key}"] button`).focus();
    });
  }
  async function refresh() {
    const values = Object.fromEntries(Object.entries(inputs).map(([name, input]) => [name, input.value]));
    const mine = ++generation;
    busy = true;
    try {
      const page = await readPage(listQuery(values), cursor, () => mine === generation,
        (scanned) => { $("#runs-searched").textContent = `searching… ${scanned} runs read`; });
      if (mine !== generation) return;
      shown = page.runs;
      deep = page.requests > 1;
      draw();
      next = page.next;
      $("#runs-searched").textContent = deep ? `${page.scanned} runs searched` : "";
      $(".live").textContent = deep ? "○ paused (search)" : "● live";
      $("#runs-empty").hidden = shown.length > 0;
      $("#runs-empty").textContent = cursor || next ? "No runs here match: try older ones." : "No runs yet.";
      $("#page-older").disabled = !next;
      $("#page-newer").disabled = cursors.length === 0;
      $("#page-number").textContent = `page ${cursors.length + 1}`;
    } catch (err) {
      $("#runs-empty").hidden = false;
      $("#runs-empty").textContent = err.message;
    } finally {
      if (mine === generation) busy = false;
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
  draw();
  refresh();
  const timer = setInterval(() => { if (!busy && !deep) refresh(); }, 2000);
  return () => { generation += 1; clearInterval(timer); };
}
