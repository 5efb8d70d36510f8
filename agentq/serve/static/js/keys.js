// The concurrency keys page: the tenant's keys holding a slot or a held job, each with its
// runs holding a slot out of its max and its jobs held waiting for one.

import { $, api, el } from "./shared.js";

export function keysView() {
  const view = $("#view");
  view.replaceChildren($("#keys-view").content.cloneNode(true));
  // As on the run page: an answer after leaving must not draw into the next page.
  let left = false;
  async function refresh() {
    try {
      const listed = await api("/v1/concurrency/keys");
      if (left) return;
      $("#keys-empty").hidden = listed.keys.length > 0;
      $("#keys-empty").textContent = "No key holds a slot or a held job.";
      $("#keys tbody").replaceChildren(...listed.keys.map((k) => el("tr", { "data-key": k.key },
        el("td", { class: "id" }, k.key),
        el("td", { class: "in-use" }, `${k.in_use} / ${k.max}`),
        el("td", {}, el("progress", { max: String(k.max), value: String(k.in_use),
          "aria-label": `${k.in_use} of ${k.max} slots in use` })),
        el("td", { class: "held" }, String(k.held)))));
    } catch (err) {
      if (left) return;
      $("#keys-empty").hidden = false;
      $("#keys-empty").textContent = err.message;
    }
  }
  refresh();
  const ticker = setInterval(refresh, 2000);
  return () => { left = true; clearInterval(ticker); };
}
