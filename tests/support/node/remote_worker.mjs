// A remote tool worker in Node, with plain fetch and no dependencies: it leases calls
// of one queue from `agentq serve`, heartbeats, reports progress, then the result.
//
//   AGENTQ_URL=http://127.0.0.1:8000 QUEUE=node-tools node remote_worker.mjs
//
// MODE=hang stops after its first progress report and never reports again (a test
// SIGKILLs it there); each line on stdout says what the worker did, as JSON.
const base = process.env.AGENTQ_URL;
const queue = process.env.QUEUE;
const mode = process.env.MODE || "work";
const headers = { "content-type": "application/json" };
if (process.env.AGENTQ_KEY) headers.authorization = `Bearer ${process.env.AGENTQ_KEY}`;

const say = (what) => console.log(JSON.stringify({ pid: process.pid, ...what }));

async function post(path, body) {
  const response = await fetch(`${base}${path}`, { method: "POST", headers, body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status} ${await response.text()}`);
  return response.json();
}

async function handle({ lease, call }) {
  say({ leased: lease.id, call: call.call_id, attempt: call.attempt });
  await post(`/v1/leases/${lease.id}/heartbeat`, { lease_s: 5 });
  await post(`/v1/leases/${lease.id}/progress`, { progress: { stage: "working", pid: process.pid } });
  say({ progress: lease.id });
  // A promise that never settles does not keep Node alive: once its sockets close it
  // would exit (code 13) on its own, before the test SIGKILLs it. The timer holds it.
  if (mode === "hang") return new Promise(() => setInterval(() => {}, 60_000)); // dies here, by SIGKILL
  const output = { upper: String(call.input.text).toUpperCase(), attempt: call.attempt };
  const reply = await post(`/v1/leases/${lease.id}/result`, { output });
  say({ result: lease.id, recorded: reply.recorded });
}

say({ started: queue });
for (;;) {
  const { calls } = await post(`/v1/queues/${queue}/lease`, { max: 4, wait_s: 5, lease_s: 3 });
  await Promise.all(calls.map(handle));
}
