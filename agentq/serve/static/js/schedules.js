// The schedules page: each schedule's next tick, what it fired, pause and resume.

import { $, api, el } from "./shared.js";

export function schedulesView() {
  const view = $("#view");
  view.replaceChildren($("#schedules-view").content.cloneNode(true));
  // As on the run page: an answer after leaving must not draw into the next page.
  let left = false;
  async function refresh() {
    try {
      const schedules = await api("/v1/schedules");
      if (left) return;
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
      if (left) return;
      $("#schedules-empty").hidden = false;
      $("#schedules-empty").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 1000);
  return () => { left = true; clearInterval(ticker); };
}
