// The batches list and a batch's page: progress by outcome, failures, cancel and retry.

import { $, age, api, el, usd } from "./shared.js";

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

// What the ended lines cost, and while lines remain, the whole batch at that rate.
function costLine(b) {
  const c = b.counts;
  const ended = c.succeeded + c.failed + c.cancelled;
  const spent = `${usd(b.cost_usd)} for ${ended} ended line${ended === 1 ? "" : "s"}`;
  if (b.cost_usd === null || ended === 0 || ended >= b.lines) return spent;
  return `${spent} · ≈ ${usd((b.cost_usd / ended) * b.lines)} for all ${b.lines} at that rate`;
}

function progressBar(info) {
  const fill = el("div", { class: "fill" });
  const bar = el("div", { class: "progress", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100" }, fill);
  paintFill(fill, info);
  return bar;
}

export function batchesView() {
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
          el("td", { class: "cost" }, usd(b.cost_usd)),
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

export function batchView(batchId) {
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
      $("#batch-cost").textContent = costLine(b);
      await failures();
    } catch (err) {
      if (!left) $("#batch-counts").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 1500);
  return () => { left = true; clearInterval(ticker); };
}
