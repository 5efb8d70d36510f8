// Queue depths over time as an inline SVG chart (no library): one line per queue, from the
// samples `agentq serve` keeps (GET /v1/queues/history), the newest at the right.

import { el } from "./shared.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 600;
const H = 160;
const COLORS = ["#4c8dff", "#2fb380", "#e0a82e", "#e5534b", "#b07cff", "#3fc1c9", "#d77ab5", "#8593a3"];

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

export function depthChart(history) {
  const samples = history.samples;
  const queues = [...new Set(samples.flatMap((s) => Object.keys(s.queues)))].sort();
  if (samples.length === 0) return el("p", { class: "muted" }, "No samples yet.");
  const t0 = samples[0].at;
  const span = Math.max(samples[samples.length - 1].at - t0, history.interval_s);
  const top = Math.max(1, ...samples.flatMap((s) => Object.values(s.queues)));
  const x = (at) => ((at - t0) / span) * W;
  const y = (depth) => H - (depth / top) * (H - 8);
  const last = samples[samples.length - 1].queues;
  const lines = queues.map((q, i) => svg("polyline", {
    "data-queue": q, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": "2",
    "vector-effect": "non-scaling-stroke",
    points: samples.map((s) => `${x(s.at).toFixed(1)},${y(s.queues[q] || 0).toFixed(1)}`).join(" ") }));
  const grid = [0, 0.5, 1].map((f) => svg("line", { x1: "0", x2: String(W), y1: String(y(top * f)), y2: String(y(top * f)),
    class: "grid", "vector-effect": "non-scaling-stroke" }));
  const minutes = Math.max(1, Math.round(span / 60));
  const summary = queues.map((q) => `${q} ${last[q] || 0}`).join(", ");
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "depth-chart", role: "img",
    "aria-label": `queue depths over the last ${minutes} min, now: ${summary}; peak ${top}` }, ...grid, ...lines);
  return el("div", { class: "depths" },
    el("div", { class: "depth-axis muted" }, el("span", {}, `${top}`), el("span", {}, "0")),
    chart,
    el("div", { class: "muted depth-span" }, el("span", {}, `−${minutes} min`), el("span", {}, "now")),
    el("ul", { class: "depth-legend" }, queues.map((q, i) => el("li", { "data-queue": q },
      el("span", { class: "swatch", style: `background:${COLORS[i % COLORS.length]}` }), `${q} `,
      el("b", { class: "now" }, String(last[q] || 0)),
      el("span", { class: "muted" }, ` (peak ${Math.max(...samples.map((s) => s.queues[q] || 0))})`)))));
}
