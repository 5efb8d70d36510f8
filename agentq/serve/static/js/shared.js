// What every page of the dashboard uses: the API over fetch, DOM building, times.

export const $ = (sel, root = document) => root.querySelector(sel);

export async function api(path, options = {}) {
  const headers = { "content-type": "application/json", ...(options.headers || {}) };
  const response = await fetch(path, { ...options, headers });
  const body = response.status === 204 ? null : await response.json();
  if (!response.ok) {
    const error = new Error((body && body.error && body.error.message) || response.statusText);
    error.status = response.status;
    throw error;
  }
  return body;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) node.setAttribute(k, v);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function age(seconds) {
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 60) return `${Math.floor(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

// A span of time, short: "0.42 s", "3m 5s", "2h 10m".
export function seconds(s) {
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${Math.floor(s % 60)}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

// USD at the deployment's prices (to a millionth below a dollar: a step costs fractions of
// a cent); null: a model without a price took part.
export function usd(cost) {
  if (cost === null || cost === undefined) return "unpriced";
  return `$${cost.toFixed(cost < 1 ? 6 : 4)}`;
}

export function json(value) { return typeof value === "string" ? value : JSON.stringify(value, null, 2); }

export function runLink(runId, text) {
  return el("a", { href: `#/runs/${encodeURIComponent(runId)}` }, text);
}
