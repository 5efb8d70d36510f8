"""Issue 26's manual cluster test: a shard failover under load, by hand (not in CI).

    PYTHONPATH=. python bench/cluster_failover_probe.py [RUNS]

A 3-primary cluster with a replica each (`cluster-node-timeout` 2000), two workers, RUNS
two-step runs with a tool call submitted one by one, one primary SIGKILLed halfway. Prints
the submits accepted and refused, the accepted runs' statuses every 2 s for up to 3
minutes, the workers' log tails and the surviving nodes' roles.
"""

import asyncio
import signal
import sys
import time

from agentq.orchestrator.client import Client
from tests.support.infra import TOOLS, WorkerProcess, wait_ready
from tests.support.redis_cluster import LocalCluster
from tests.support.specs import calls, scripted

SPEC = scripted(calls(("add", {"a": 1, "b": 2})), {"text": "done"}, tools=["add"])
N = int(sys.argv[1]) if len(sys.argv) > 1 else 150
cl = LocalCluster(3, replicas=1)
workers = []
try:
    for p in cl.ports:
        cl.node(p).config_set("cluster-node-timeout", 2000)
    primaries = [p for p in cl.ports if p not in cl.replica_ports()]
    victim = primaries[0]
    workers = [WorkerProcess(cl.url, "--tools", TOOLS) for _ in range(2)]
    for w in workers:
        wait_ready(w)

    async def main():
        accepted, refused = [], 0
        async with Client(cl.url) as c:
            killed_at = None
            for i in range(N):
                if i == N // 2:
                    cl.procs[cl.ports.index(victim)].send_signal(signal.SIGKILL)
                    killed_at = time.monotonic()
                try:
                    accepted.append(await c.runs.submit(SPEC))
                except Exception as e:
                    refused += 1
                    if refused < 3:
                        print("refused:", type(e).__name__, str(e)[:150])
            print(f"accepted {len(accepted)}, refused {refused}")
            for _ in range(90):
                statuses = {}
                for rid in accepted:
                    try:
                        r = await c.runs.status(rid)
                        k = str(r.status)
                    except Exception as e:
                        k = type(e).__name__
                    statuses[k] = statuses.get(k, 0) + 1
                print(f"{time.monotonic() - killed_at:.1f}s after kill", statuses, flush=True)
                if statuses.get("succeeded", 0) == len(accepted):
                    break
                await asyncio.sleep(2)
            for w in workers:
                print(w.log()[-1500:])

    asyncio.run(main())
    print("roles", {p: cl.replication(p)["role"] for p in cl.ports if p != victim})
finally:
    for w in workers:
        w.stop()
    cl.stop()
