// A run's concurrency key on its page: the key's slots in use out of its max, and whether
// the run holds one (running) or waits for one.

import { $, el } from "../shared.js";

const STATES = { running: "running: holds a slot", waiting: "waiting for a slot" };

export function drawSlot(result) {
  const box = $("#run-concurrency");
  const key = result.concurrency;
  box.hidden = !key;
  if (!key) return;
  // An ended run no longer counts under its key: only the key and its max are left.
  const load = key.in_use === null ? `at most ${key.max}`
    : `${key.in_use} / ${key.max} in use${key.held ? ` · ${key.held} held` : ""}`;
  box.dataset.state = key.state || "";
  box.replaceChildren("key ", el("a", { href: "#/keys", class: "conc-key" }, key.key), ` (${load})`,
    key.state ? el("b", { class: "slot-state" }, ` · ${STATES[key.state]}`) : "");
}
