// The workers page: each live worker as of its last heartbeat, and the queue depths over time.

import { depthChart } from "./depths.js";
import { $, age, api, el } from "./shared.js";

export function workersView() {
  const view = $("#view");
  view.replaceChildren($("#workers-view").content.cloneNode(true));
  // As in runView: a response after leaving must not draw into the next view.
  let left = false;
  async function refresh() {
    api("/v1/queues/history").then((history) => { if (!left) $("#depths").replaceChildren(depthChart(history)); },
      (err) => { if (!left) $("#depths").textContent = err.message; });
    try {
      const workers = await api("/v1/workers");
      if (left) return;
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
      if (left) return;
      $("#workers-empty").hidden = false;
      $("#workers-empty").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 2000);
  return () => { left = true; clearInterval(ticker); };
}
