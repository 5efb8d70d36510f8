"""Where a model step's Redis time goes as a run grows: `begin_step` at step ~10 and
~100 of a run whose tool returns 1 KB per step, from Redis's own SLOWLOG (every
command logged, with its server-side duration; a script's time includes the commands it
calls), and the bytes the run stores.

    python bench/history_profile.py [--steps 105] [--cold] [--quick]

`--cold` runs the worker without its history cache (as a worker that did not run the
run's last step: every step reads the whole history). Prints the median server time of
each transition at steps 5-15 and 95-105, and their ratio. Runs against whatever
`agentq` PYTHONPATH names, so the same script profiles an older tree.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).parent))

from core_bench import redis_server
from hop_budget import kilobyte, one_tool_spec, run_bytes, wait_all

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.runs.store import load_scripts
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime

EARLY, LATE = range(5, 16), range(95, 106)


def _script_names() -> dict[str, str]:
    return {hashlib.sha1(src.encode()).hexdigest(): name for name, src in load_scripts().items()}


async def _profile(url: str, steps: int) -> dict[str, dict[int, list[int]]]:
    """Server-side µs of each transition, by script and step, for one run."""
    runtime = WorkerRuntime(
        url, executors=[FunctionExecutor([kilobyte])], queues=[MODEL_QUEUE, TOOLS_QUEUE]
    )
    await runtime.start()
    sync = redis.Redis.from_url(url)
    try:
        async with Client(url) as client:
            await wait_all(client, [await client.runs.submit(one_tool_spec("kilobyte", 3))])
            sync.config_set("slowlog-log-slower-than", 0)
            sync.config_set("slowlog-max-len", 1_000_000)
            sync.slowlog_reset()
            run_id = await client.runs.submit(one_tool_spec("kilobyte", steps))
            await wait_all(client, [run_id])
            entries = sync.slowlog_get(1_000_000)
            sync.config_set("slowlog-log-slower-than", 10_000)
            stored = await run_bytes(url, run_id)
    finally:
        sync.close()
        await runtime.stop()
    names = _script_names()
    by_script: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    outside: dict[str, list[int]] = defaultdict(list)
    for entry in entries:
        # Redis 7 logs the commands a script calls too: begin_step's own LRANGE reads to
        # the end (-1); the read outside it names its last message.
        args = bytes(entry["command"]).split(b" ")
        command = args[0].upper().decode()
        if command == "HGETALL" or (command == "LRANGE" and args[-1] != b"-1"):
            outside[command].append(int(entry["duration"]))
    reads = len(outside["LRANGE"])
    if reads:
        total = sum(outside["LRANGE"]) + sum(outside["HGETALL"])
        print(f"histories read outside begin_step: {reads}, {total / reads:.0f} µs each on average")
    for entry in entries:
        # EVALSHA sha numkeys k1 k2 k3 ARGV[1] (SLOWLOG cuts each argument at 128 bytes)
        parts = bytes(entry["command"]).split(b" ", 6)
        if len(parts) < 7 or parts[0].upper() != b"EVALSHA":
            continue
        name = names.get(parts[1].decode())
        if name is not None:
            by_script[name][_step_of(parts[6].decode(errors="replace"))].append(
                int(entry["duration"])
            )
    print(f"run of {steps} steps: {stored / 1024:.0f} KB stored")
    return by_script


def _step_of(body: str) -> int:
    """The step of a (possibly truncated) ARGV: `"step":N`."""
    marker = '"step":'
    at = body.find(marker)
    if at < 0:
        return -1
    digits = ""
    for ch in body[at + len(marker) :]:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else -1


def _report(by_script: dict[str, dict[int, list[int]]]) -> None:
    print(f"{'transition':<16}{'µs at 5-15':>12}{'µs at 95-105':>14}{'ratio':>8}")
    for name in sorted(by_script):
        steps = by_script[name]
        early = [d for n in EARLY for d in steps.get(n, [])]
        late = [d for n in LATE for d in steps.get(n, [])]
        if not early or not late:
            continue
        e, l_ = statistics.median(early), statistics.median(late)
        print(f"{name:<16}{e:>12.0f}{l_:>14.0f}{l_ / e:>7.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=105)
    parser.add_argument("--cold", action="store_true", help="no history cache in the worker")
    # One run of 105 steps is the least that reaches the late window: already quick.
    parser.add_argument("--quick", action="store_true", help="the default (one 105-step run)")
    args = parser.parse_args()
    if args.cold:
        os.environ["AGENTQ_HISTORY_CACHE_BYTES"] = "0"
    with redis_server() as url:
        _report(asyncio.run(_profile(url, args.steps)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
