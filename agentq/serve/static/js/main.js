// The agentq dashboard: plain JavaScript modules over the same HTTP API any client uses,
// one module per page, loaded by the browser as they are (no build step).

import { batchView, batchesView } from "./batches.js";
import { runView } from "./run/view.js";
import { listView } from "./runs.js";
import { schedulesView } from "./schedules.js";
import { keysView } from "./keys.js";
import { $, api } from "./shared.js";
import { threadView, threadsView } from "./threads.js";
import { workersView } from "./workers.js";

let stopView = () => {};

// The key is posted once for an HttpOnly session cookie (SameSite=Strict) and then
// forgotten: the page never stores it, and no URL carries it. Every request below,
// EventSource included, is same-origin and authenticated by that cookie.
async function signIn(key) {
  const response = key
    ? await fetch("/v1/session", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ key }) })
    : await fetch("/v1/session", { method: "DELETE" });
  return response.ok;
}

// -- fleet -------------------------------------------------------------------

async function refreshFleet() {
  try {
    const fleet = await api("/v1/fleet");
    const queues = Object.entries(fleet.queues).map(([q, n]) => `${q} ${n}`).join(" · ");
    $("#fleet").textContent = `${fleet.workers} worker${fleet.workers === 1 ? "" : "s"} · ready or running: ${queues}`;
  } catch (err) {
    $("#fleet").textContent = err.message;
  }
}

// -- routing -------------------------------------------------------------------

function route() {
  stopView();
  const run = location.hash.match(/^#\/runs\/(.+)$/);
  const batch = location.hash.match(/^#\/batches\/(.+)$/);
  const thread = location.hash.match(/^#\/threads\/(.+)$/);
  if (run) stopView = runView(decodeURIComponent(run[1]));
  else if (batch) stopView = batchView(decodeURIComponent(batch[1]));
  else if (thread) stopView = threadView(decodeURIComponent(thread[1]));
  else if (location.hash === "#/threads") stopView = threadsView();
  else if (location.hash === "#/batches") stopView = batchesView();
  else if (location.hash === "#/schedules") stopView = schedulesView();
  else if (location.hash === "#/workers") stopView = workersView();
  else if (location.hash === "#/keys") stopView = keysView();
  else stopView = listView();
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  const input = $("#api-key");
  input.onchange = async () => {
    const key = input.value.trim();
    const ok = await signIn(key);
    input.value = "";
    input.placeholder = !key ? "signed out" : ok ? "signed in" : "key refused";
    route();
    refreshFleet();
  };
  route();
  refreshFleet();
  setInterval(refreshFleet, 3000);
});
