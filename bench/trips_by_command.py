"""What a run costs Redis: the worker's round trips per job by command, Redis's own
commands per step by command, and Redis's CPU per run against raw arq's.

    python bench/trips_by_command.py [RUNS] [--profile | --sample] [--workers N[,N...]] [--rounds R]
                                     [--step-runs S] [--quick] [--wait]

Starts its own redis-server and one agentq worker process (as `core_bench.py` does),
submits RUNS full runs (2 model steps + 2 parallel no-op calls, 4 jobs each) at once
after a warm-up, and prints

1. the round trips the worker sent per job, by command: a command sent alone is named
   by itself (EVALSHA by its script's name), a pipeline by the commands in it;
2. Redis's CPU per run over those runs (`INFO cpu`, the server's user + system time,
   every client's commands included: the submits, the worker, the waits), against raw
   arq's in the same run: RUNS x 4 no-op jobs enqueued with `ArqRedis.enqueue_job`
   and run by as many arq workers (16 jobs each, poll 10 ms) on a redis-server of
   their own; and the part of it Redis spent in scripts (`INFO commandstats`);
3. Redis commands per step, by command (`INFO commandstats`: top-level and inside Lua),
   of 20-step runs one after another (one no-op call per step), issue 31's figure;
4. each hot transition's fixed cost: Redis's time per call of its script up to its own
   body (the constants and the prelude it keeps), against a script that only returns;
   and that part's Lua alone (the claim's too): Redis's CPU per run of it, run many times
   inside one script, which a busy machine does not inflate.

`--workers N` runs N worker processes and sums their round trips (how claims behave
when workers compete). With several counts (`--workers 1,2,4`) each is measured in turn,
and a closing table gives, per count, runs/s and the workers' CPU per run (every worker
process's user + system time over the full runs) for agentq and for raw arq on as many
processes: issue 31's "worker processes add capacity" (CPU per run flat within 10 %).
`--rounds R` (3 with several counts) measures every count R times, agentq and raw arq
alternated (who goes first swaps each round); each round's CPU per run is compared with
that round's first count, and the table gives the medians of those ratios with their
range, so one noisy sample cannot decide the goal. The per-command report, the step
runs and the profile come from the first round.
`--profile` also cProfiles the (first) worker during the full
runs only and prints where its CPU goes (by own time, and cumulative). cProfile's cost per
call inflates small functions (pydantic calls, helpers) several times over: `--sample`
instead samples the worker's Python stack every few ms of its CPU (SIGPROF) and prints the
share of samples each function was on the stack for, and where the innermost frames were
called from in agentq. `--quick` is a smoke run (20 runs, one 20-step run). `--wait`
waits for each full run with the client's `runs.wait` (as an application does: its
result read too) instead of the bench's poll of each run's meta, so that the waits'
share of Redis CPU shows.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import hashlib
import io
import json
import multiprocessing as mp
import os
import pstats
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

import core_bench  # noqa: E402
import hiredis  # noqa: E402
import hop_budget  # noqa: E402
import redis  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
from arq.connections import RedisSettings, create_pool  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402


def _script_names() -> dict[str, str]:
    """sha1 -> name of every Lua script the worker may send."""
    import agentq.workers.queue.liveness as liveness
    from agentq.orchestrator.runs import store

    sources: dict[str, str] = {f"lua:{k}": v for k, v in store._SCRIPTS.items()}
    sources.update(
        {
            "REAP_GATE": liveness.REAP_GATE,
            "REAP_PARTITION": liveness.REAP_PARTITION,
            "RENEW": liveness.RENEW,
        }
    )
    try:  # the claim scripts (absent before workers/queue/claims.py)
        from agentq.workers.queue import claims

        sources.update({"TAKE": claims.TAKE, "CLAIM_ONE": claims.CLAIM_ONE})
        # (a job's end behind its transition: the same script under Lua's shebang)
        riding = getattr(claims, "TAKE_RIDING", None)
        if riding is not None:
            sources["TAKE "] = riding
        # (a transition with a job's end inside it: named as the transition, with `+end`)
        ending = getattr(claims, "ending", None)
        if ending is not None:
            for name, src in list(sources.items()):
                if name.startswith("lua:") and (ended := ending(src)) is not None:
                    sources[f"{name}+end"] = ended
    except ImportError:
        from agentq.workers.worker import runtime

        for name in ("_CLAIM", "_FINISH"):
            if hasattr(runtime, name):
                sources[name.strip("_")] = getattr(runtime, name)
    return {hashlib.sha1(src.encode()).hexdigest(): name.strip() for name, src in sources.items()}


def _commands(packed: Iterable[bytes], scripts: dict[str, str]) -> list[str]:
    """The command names in a packed request (RESP arrays of bulk strings, which is what
    a reply parser reads too). Parsed by hiredis, in C: this runs in the measured worker
    on every send, and a parse in Python (61-69 µs a commit_step+TAKE pipeline of 3.7 KB,
    against 6-9 µs) was charged to agentq's worker CPU per run, and none of it to raw
    arq's."""
    reader = hiredis.Reader()
    for chunk in packed:  # as sent: no copy joined
        reader.feed(chunk)
    names: list[str] = []
    while (args := reader.gets()) is not False:
        name = args[0].decode().upper()
        if name == "EVALSHA":
            name = scripts.get(args[1].decode(), "EVALSHA?")
        names.append(name)
    return names


def _tally(counts: dict[str, int], scripts: dict[str, str]) -> None:
    from redis.asyncio.connection import AbstractConnection

    from agentq.orchestrator.redis.lean import LeanConnection

    # agentq's connections send with their own method (orchestrator/redis/lean.py).
    for cls in (AbstractConnection, LeanConnection):
        original = cls.send_packed_command

        async def counted(
            self: AbstractConnection,
            command: Any,
            check_health: bool = True,
            original: Any = original,
        ) -> None:
            chunks = [command] if isinstance(command, bytes | bytearray) else command
            names = [n for n in _commands(chunks, scripts) if n not in ("MULTI", "EXEC")]
            label = names[0] if len(names) == 1 else "pipeline(" + "+".join(names) + ")"
            counts[label] += 1
            await original(self, command, check_health)

        setattr(cls, "send_packed_command", counted)  # noqa: B010

    from agentq.workers.queue.claims import Taker

    # Every TAKE reply (alone, behind a token, or riding a job's last transition): how
    # many claimed nothing, which grows with the processes competing for the same jobs.
    original_taken = Taker.taken

    def taken(self: Taker, reply: list[Any]) -> Any:
        more, claimed = original_taken(self, reply)
        counts[TAKE_CLAIMED if claimed else TAKE_EMPTY] += 1
        counts[TAKE_JOBS] += len(claimed)
        return more, claimed

    setattr(Taker, "taken", taken)  # noqa: B010


# TAKE replies, kept with the round trips by label but not round trips themselves.
TAKE_EMPTY, TAKE_CLAIMED, TAKE_JOBS = "~take replies: empty", "~take replies: claimed", "~take jobs"


class Sampler:
    """Where a process's CPU goes, by sampling: on each SIGPROF (every `interval_s` of the
    process's CPU) the main thread's Python stack is counted, each function once a sample
    (inclusive), and the innermost frame against the innermost agentq frame that called
    it. A C function's time lands on the Python frame that called it."""

    def __init__(self, interval_s: float = 0.001) -> None:
        self.interval_s = interval_s
        self.samples = 0
        self.inclusive: collections.Counter[str] = collections.Counter()
        self.called_from: collections.Counter[str] = collections.Counter()

    @staticmethod
    def _name(frame: Any) -> str:
        path = frame.f_code.co_filename
        for marker in ("site-packages/", "agentq/", "python3.11/"):
            if marker in path:
                path = (marker if marker == "agentq/" else "") + path.split(marker)[-1]
                break
        return f"{path}:{frame.f_code.co_name}"

    def _sample(self, signum: int, frame: Any) -> None:
        self.samples += 1
        seen: set[str] = set()
        leaf = self._name(frame) if frame is not None else "?"
        caller = ""
        while frame is not None:
            name = self._name(frame)
            if not caller and name.startswith("agentq/") and name != leaf:
                caller = f"{name}:{frame.f_lineno}"
            if name not in seen:
                seen.add(name)
                self.inclusive[name] += 1
            frame = frame.f_back
        self.called_from[f"{leaf} <- {caller or '?'}"] += 1

    def enable(self) -> None:
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, self.interval_s, self.interval_s)

    def disable(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)

    def dump_stats(self, path: str) -> None:
        Path(path).write_text(
            json.dumps(
                {
                    "samples": self.samples,
                    "inclusive": self.inclusive,
                    "called_from": self.called_from,
                }
            )
        )


def _sample_report(path: str, top: int = 40) -> str:
    data = json.loads(Path(path).read_text())
    n = max(data["samples"], 1)
    lines = [f"{data['samples']} samples of the worker's CPU during the full runs"]
    lines.append("\non the stack (inclusive), agentq's functions:")
    agentq = [(k, v) for k, v in data["inclusive"].items() if k.startswith("agentq/")]
    for name, count in sorted(agentq, key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {100 * count / n:5.1f}%  {name}")
    lines.append("\ninnermost frame <- the agentq frame it was called from:")
    for name, count in sorted(data["called_from"].items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {100 * count / n:5.1f}%  {name}")
    return "\n".join(lines)


def _worker(
    url: str, ready: MpEvent, reset: MpEvent, dump: MpEvent, stop: MpEvent, out: str, profile: str
) -> None:
    counts: dict[str, int] = collections.Counter()
    _tally(counts, _script_names())
    # CPU time, not wall time: a wait (epoll, a send that yields the core to Redis) is
    # not a cost of the worker.
    profiler: cProfile.Profile | Sampler = (
        Sampler() if profile == "sample" else cProfile.Profile(time.process_time)
    )

    async def main() -> None:
        runtime = core_bench.WorkerRuntime(
            url,
            executors=[core_bench.FunctionExecutor([core_bench.noop])],
            queues=[core_bench.MODEL_QUEUE, core_bench.TOOLS_QUEUE],
            freeze_startup_heap=True,  # as `agentq worker` does
        )
        await runtime.start()
        ready.set()
        await asyncio.to_thread(reset.wait)
        counts.clear()
        if profile:
            profiler.enable()
        await asyncio.to_thread(dump.wait)
        if profile:
            profiler.disable()
            profiler.dump_stats(out + ".prof")
        await asyncio.to_thread(Path(out).write_text, json.dumps(counts))
        await asyncio.to_thread(stop.wait)  # the step runs still need the worker
        await runtime.stop()

    asyncio.run(main())


class Server:
    """Redis's own counters at one moment: calls and time (µs) by command, and the
    server's CPU (s). A script's time includes its inner commands'."""

    def __init__(self, calls: dict[str, int], usec: dict[str, int], cpu_s: float) -> None:
        self.calls, self.usec, self.cpu_s = calls, usec, cpu_s

    @classmethod
    async def read(cls, url: str) -> Server:
        raw = aioredis.Redis.from_url(url)
        try:
            stats: dict[str, Any] = await raw.info("commandstats")
            cpu: dict[str, Any] = await raw.info("cpu")
        finally:
            await raw.aclose()
        counted = {
            name.removeprefix("cmdstat_"): value
            for name, value in stats.items()
            if isinstance(value, dict) and name not in ("cmdstat_info", "cmdstat_config")
        }
        return cls(
            {k: int(v["calls"]) for k, v in counted.items()},
            {k: int(v["usec"]) for k, v in counted.items()},
            float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
        )

    def since(self, before: Server) -> Server:
        calls = {k: v - before.calls.get(k, 0) for k, v in self.calls.items()}
        usec = {k: v - before.usec.get(k, 0) for k, v in self.usec.items()}
        return Server(
            {k: v for k, v in calls.items() if v},
            {k: v for k, v in usec.items() if calls[k]},
            self.cpu_s - before.cpu_s,
        )


class Measured:
    """The Redis side of the runs: CPU over the full runs, commands over the step runs;
    and the workers' side of the full runs: their wall time and CPU (all processes)."""

    def __init__(self) -> None:
        self.full_runs = Server({}, {}, 0.0)
        self.steps = Server({}, {}, 0.0)
        self.full_runs_s = 0.0
        self.worker_cpu_s = 0.0
        self.worker_sleeps = 0
        # Over the step runs, by script: (calls, Redis's µs in them) from SLOWLOG.
        self.step_scripts: dict[str, tuple[int, int]] = {}


WARM_UP = 40  # full runs per worker process before the measured ones


def _cpu_s(pids: list[int]) -> float:
    return sum(hop_budget.cpu_s(pid) for pid in pids)


def _sleeps(pids: list[int]) -> int:
    """How many times the processes went to sleep waiting (their voluntary context
    switches, every thread's: an event loop's wait on its sockets is one)."""
    total = 0
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
    return total


async def _measure(
    url: str,
    runs: int,
    step_runs: int,
    reset: MpEvent,
    dump: MpEvent,
    outs: list[str],
    pids: list[int],
    wait: bool = False,
) -> Measured:
    measured = Measured()
    async with Client(url) as client:
        # As many warm-up runs per worker process as one worker gets: each process's
        # connection pool grows to its concurrency before the clock starts, not during.
        warm = await asyncio.gather(
            *(client.runs.submit(hop_budget.full_run_spec()) for _ in range(WARM_UP * len(pids)))
        )
        await hop_budget.wait_all(client, list(warm))
        await asyncio.sleep(1.5)  # the idle worker's polls settle
        reset.set()
        await asyncio.sleep(0.2)
        before = await Server.read(url)
        cpu0, sleeps0, t0 = _cpu_s(pids), _sleeps(pids), time.perf_counter()
        run_ids = await asyncio.gather(
            *(client.runs.submit(hop_budget.full_run_spec()) for _ in range(runs))
        )
        if wait:  # as an application waits: each run at once, its result read
            await asyncio.gather(*(client.runs.wait(run_id) for run_id in run_ids))
        else:
            await hop_budget.wait_all(client, list(run_ids))
        measured.full_runs_s = time.perf_counter() - t0
        measured.worker_cpu_s = _cpu_s(pids) - cpu0
        measured.worker_sleeps = _sleeps(pids) - sleeps0
        measured.full_runs = (await Server.read(url)).since(before)
        dump.set()
        # Every command logged with its time, so each script's share shows (SLOWLOG's
        # time is a command's own, a script's inner commands included).
        await client.redis.config_set("slowlog-max-len", 1_000_000)
        await client.redis.config_set("slowlog-log-slower-than", 0)
        await client.redis.slowlog_reset()
        before = await Server.read(url)
        for _ in range(step_runs):  # one after another, as core_bench's step latency
            await hop_budget.wait_all(
                client, [await client.runs.submit(core_bench.step_spec(core_bench.RUN_STEPS))]
            )
        measured.steps = (await Server.read(url)).since(before)
        measured.step_scripts = _by_script(await client.redis.slowlog_get(-1))
        await client.redis.config_set("slowlog-log-slower-than", 10_000)
        for _ in range(200):
            if all([await asyncio.to_thread(_written, out) for out in outs]):
                break
            await asyncio.sleep(0.05)
    return measured


def _by_script(entries: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """SLOWLOG's EVALSHA entries by script name: (calls, µs)."""
    names = _script_names()
    calls: collections.Counter[str] = collections.Counter()
    usec: collections.Counter[str] = collections.Counter()
    for entry in entries:
        command = entry["command"]
        words = (command.decode() if isinstance(command, bytes) else str(command)).split()
        if len(words) > 1 and words[0].upper() == "EVALSHA":
            name = names.get(words[1], "other")
            calls[name] += 1
            usec[name] += int(entry["duration"])
    return {name: (calls[name], usec[name]) for name in calls}


@dataclass(frozen=True)
class Fleet:
    """RUNS full runs (or RUNS x 4 raw arq jobs) on a number of worker processes."""

    processes: int
    runs_per_s: float
    worker_cpu_ms_per_run: float
    redis_cpu_ms_per_run: float


async def _arq_fleet(url: str, runs: int, processes: int) -> Fleet:
    """RUNS x 4 raw arq no-op jobs on `processes` arq workers (16 jobs each, poll 10 ms)
    started first, as agentq's are: enqueued at once, timed until the last one ends."""
    ctx = mp.get_context("spawn")
    jobs = runs * hop_budget.FULL_RUN_JOBS
    sent = ctx.Value("q", 0, lock=False)
    ended = ctx.Value("q", 0)  # the fleet's jobs ended, shared
    fleet = [core_bench.start_arq_worker(ctx, url, 16, jobs, sent, ended) for _ in range(processes)]
    pids = [proc.pid or 0 for proc, _ in fleet]
    pool = await create_pool(RedisSettings.from_dsn(url))
    try:
        for _ in fleet:
            if await pool.blpop([core_bench.ARQ_READY], 60) is None:
                raise RuntimeError("a raw arq worker did not start in 60 s")
        before, cpu0, t0 = await Server.read(url), _cpu_s(pids), time.perf_counter()
        for start in range(0, jobs, 100):
            await asyncio.gather(
                *(pool.enqueue_job("arq_noop") for _ in range(start, min(jobs, start + 100)))
            )
        if await core_bench.blpop(pool, core_bench.DONE, 120) is None:
            raise RuntimeError("raw arq jobs did not finish in 120 s")
        seconds, cpu = time.perf_counter() - t0, _cpu_s(pids) - cpu0
        redis_cpu = (await Server.read(url)).since(before).cpu_s
        return Fleet(processes, runs / seconds, cpu * 1000 / runs, redis_cpu * 1000 / runs)
    finally:
        for proc, stop in fleet:
            core_bench._stop(proc, stop)
        await pool.aclose()


HOT = ("begin_step", "commit_step", "claim_call", "record_result", "emit")


def _fixed_costs(url: str, rounds: int, calls: int) -> dict[str, float]:
    """Redis's time (µs) per call of each HOT transition's script cut before its own body,
    and of `return 1` ("none"): medians of `rounds` rounds of `calls` calls each."""
    from agentq.orchestrator.runs.store import load_scripts

    loaded = load_scripts()
    sources = {n: loaded[n][: loaded[n].rindex(f"-- {n}: ")] + "\nreturn 1" for n in HOT}
    sources["none"] = "return 1"
    client = redis.Redis.from_url(url)
    keys = ["aq:run:{x}", "aq:run:{x}:msgs", "aq:run:{x}:events"]
    arg = json.dumps({"run_id": "x", "at": 0, "retention_s": 60})
    times: dict[str, list[float]] = collections.defaultdict(list)
    try:
        for _ in range(rounds):
            for name, source in sources.items():
                sha = client.script_load(source)
                client.evalsha(sha, len(keys), *keys, arg)  # the stats have a row
                before = client.info("commandstats")["cmdstat_evalsha"]
                for _ in range(calls):
                    client.evalsha(sha, len(keys), *keys, arg)
                after = client.info("commandstats")["cmdstat_evalsha"]
                times[name].append((after["usec"] - before["usec"]) / calls)
    finally:
        client.close()
    return {name: statistics.median(values) for name, values in times.items()}


def _looped(piece: str, runs: int) -> str:
    """A script that runs the Lua `piece` `runs` times (a function body each time, so its
    locals and closures are built anew, as on each call of the script it comes from)."""
    return f"for _ = 1, {runs} do\nlocal function piece()\n{piece}\nend\npiece()\nend\nreturn 1"


def _prelude_cpu(url: str, rounds: int, runs: int) -> dict[str, float]:
    """Redis's CPU (µs, `INFO cpu`) per run of each HOT transition's script up to its own
    body and of the claim's up to its claim (TAKE, with no job to end and none to claim),
    run `runs` times inside one script: the Lua alone, with no call, arguments, reply or
    round trip around it, and CPU, not wall time, so a busy machine does not inflate it
    (medians of `rounds`). What defining the preludes once (Redis Functions) would save
    per call, at most."""
    from agentq.orchestrator.runs.store import load_scripts
    from agentq.workers.queue import claims

    loaded = load_scripts()
    pieces = {n: loaded[n][: loaded[n].rindex(f"-- {n}: ")] for n in HOT}
    claim_at = claims.TAKE.find("if n <= 0 or ARGV[1] ~= '1' then")
    if claim_at > 0:
        pieces["TAKE"] = claims.TAKE[:claim_at]
    pieces["none"] = "local x = 1"
    client = redis.Redis.from_url(url)
    keys = ["aq:run:{x}", "aq:run:{x}:msgs", "aq:run:{x}:events", "k4", "k5", "k6", "k7", "k8"]
    arg = json.dumps({"run_id": "x", "at": 0, "retention_s": 60, "step": 0, "events": []})
    # TAKE's ARGV[2..]: worker w, 0 to claim, no ended job ('' at 9), no tool set given.
    take = ["w", "0", "60000", "ip:", "job:", "retry:", "lease:", "", "done", "0", "0", "0"]
    take += ["10", "0", "0", "", "", "0"]

    def cpu_s() -> float:
        info = client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    times: dict[str, list[float]] = collections.defaultdict(list)
    try:
        shas = {name: client.script_load(_looped(piece, runs)) for name, piece in pieces.items()}
        for _ in range(rounds):
            for name, sha in shas.items():
                before = cpu_s()
                client.evalsha(sha, len(keys), *keys, arg, *take)
                times[name].append((cpu_s() - before) * 1e6 / runs)
    finally:
        client.close()
    return {name: statistics.median(values) for name, values in times.items()}


def _python_work(barrier: Any, results: Any, iterations: int) -> None:
    """A fixed piece of a worker's Python, with no Redis, sockets or event loop: a 2-call
    step's commit and its two results built and serialized as the transitions are sent.
    Its CPU per iteration (µs) goes to `results` once every process has done it."""
    from agentq.orchestrator.core.messages import ToolResultPart
    from agentq.orchestrator.loop.plan import CallPlan, StepPlan
    from agentq.orchestrator.machine.transition import script_args
    from agentq.orchestrator.runs.state import CallStatus, StepAfter
    from agentq.orchestrator.runs.transitions import commit_args, result_args

    calls = [
        CallPlan(id=f"c{i}", name="noop", input={"i": i}, status=CallStatus.QUEUED, queue="t")
        for i in range(2)
    ]
    plan = StepPlan(
        step=0, text="", finish_reason="tool-calls", calls=calls, after=StepAfter.CONTINUE
    )
    part = ToolResultPart(tool_call_id="c0", tool_name="noop", output={"ok": True})

    def once() -> None:
        script_args(commit_args("r", plan), retention_s=60)
        for _ in range(2):
            script_args(result_args("r", 0, part), retention_s=60)

    for _ in range(max(iterations // 5, 1)):  # warm
        once()
    barrier.wait()
    start = time.process_time()
    for _ in range(iterations):
        once()
    results.put((time.process_time() - start) * 1e6 / iterations)


def _machine_tax(processes: int, iterations: int) -> float:
    """CPU per iteration (µs, the processes' mean) of `_python_work` in `processes`
    processes at once: what the machine charges a unit of Python for the processes
    sharing its cores (caches, the scheduler), whatever agentq does."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_python_work, args=(barrier, results, iterations), daemon=True)
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    try:
        return statistics.mean(results.get(timeout=120) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=20)


def _machine(taxes: list[dict[int, float]]) -> None:
    """The machine's own growth beside the scaling table: the same fixed Python in 1, 2,
    4 ... processes at once, measured in each round after its fleets."""
    counts = sorted(taxes[0])
    print(
        "\nthe machine's own growth: a fixed piece of a worker's Python (a step's"
        " transitions built and serialized; no Redis, no sockets) in as many processes at"
        " once, CPU per iteration against 1 process's, by round:"
    )
    for n in counts[1:]:
        each = [t[n] / t[counts[0]] for t in taxes]
        print(
            f"  {n:5d}  {', '.join(f'{x:.2f}x' for x in each)}:"
            f" median {statistics.median(each):.2f}x ({min(each):.2f}-{max(each):.2f}x)"
        )


def _written(path: str) -> bool:
    return os.path.exists(path) and os.path.getsize(path) > 0


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/trips_by_command.py",
        description="Redis round trips per job, Redis commands per step and Redis CPU per"
        " run (against raw arq's), on agentq worker processes; with several counts of"
        " worker processes, how runs/s and worker CPU per run scale against raw arq's.",
    )
    parser.add_argument("runs", nargs="?", type=int, default=250, help="full runs (250)")
    parser.add_argument(
        "--workers",
        default="1",
        help="worker processes, or several counts comma-separated, each measured in turn"
        " against as many raw arq workers (1; e.g. 1,2,4)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds of every count of worker processes, agentq and raw arq alternated"
        " (which goes first swaps each round); the scaling figures are medians of the"
        " rounds' own ratios (3 with several counts, else 1)",
    )
    parser.add_argument("--step-runs", type=int, default=5, help="20-step runs (5)")
    parser.add_argument("--profile", action="store_true", help="cProfile the first worker")
    parser.add_argument(
        "--sample",
        action="store_true",
        help="sample the first worker's stack on its CPU clock instead (SIGPROF, every 1 ms"
        " asked; the kernel's tick, 4 ms here, at the coarsest)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 runs, 1 step run")
    parser.add_argument(
        "--wait",
        action="store_true",
        help="wait for each full run with the client's `runs.wait` (its result read, as an"
        " application waits) instead of the bench's poll of each run's meta",
    )
    args = parser.parse_args(argv)
    try:
        args.workers = [int(n) for n in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers: counts of processes, comma-separated: {args.workers!r}")
    if args.quick:
        args.runs, args.step_runs = 20, 1
    if args.rounds is None:
        args.rounds = 3 if len(args.workers) > 1 and not args.quick else 1
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    return args


def _agentq(
    runs: int, workers: int, step_runs: int, profile: str, wait: bool = False
) -> tuple[Measured, dict[str, int], str]:
    """The full and step runs on `workers` worker processes, on a Redis of their own:
    what Redis and the workers spent, the workers' round trips by label, and the first
    worker's counts file (its profile beside it)."""
    ctx = mp.get_context("spawn")
    tmp = tempfile.mkdtemp(prefix="agentq-trips-")
    outs = [os.path.join(tmp, f"counts-{i}.json") for i in range(workers)]
    with core_bench.redis_server() as url:
        reset, dump, stop = ctx.Event(), ctx.Event(), ctx.Event()
        procs = []
        for i, out in enumerate(outs):
            ready = ctx.Event()
            proc = ctx.Process(
                target=_worker,
                args=(url, ready, reset, dump, stop, out, profile if i == 0 else ""),
                daemon=True,
            )
            proc.start()
            procs.append(proc)
            if not ready.wait(30):
                raise RuntimeError("a worker did not start")
        pids = [proc.pid or 0 for proc in procs]
        try:
            measured = asyncio.run(_measure(url, runs, step_runs, reset, dump, outs, pids, wait))
        finally:
            stop.set()
            for proc in procs:
                proc.join(timeout=20)
                if proc.is_alive():
                    proc.terminate()
    counts: dict[str, int] = collections.Counter()
    for out in outs:
        counts.update(json.loads(Path(out).read_text()))
    return measured, counts, outs[0]


def _report(
    runs: int, workers: int, step_runs: int, measured: Measured, counts: dict[str, int], arq: Fleet
) -> None:
    jobs = runs * hop_budget.FULL_RUN_JOBS
    takes = {k: counts.pop(k, 0) for k in (TAKE_EMPTY, TAKE_CLAIMED, TAKE_JOBS)}
    total = sum(counts.values())
    print(
        f"{runs} full runs ({jobs} jobs) on {workers} worker process(es);"
        f" load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"worker round trips per job: {total / jobs:.2f}; the workers' sleeps per job"
        f" (voluntary context switches: wake-ups): {measured.worker_sleeps / jobs:.2f}"
    )
    for label, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {n / jobs:6.2f}  {label}")
    print(
        f"TAKE replies per job: {takes[TAKE_EMPTY] / jobs:.2f} claimed nothing,"
        f" {takes[TAKE_CLAIMED] / jobs:.2f} claimed"
        f" ({takes[TAKE_JOBS] / max(takes[TAKE_CLAIMED], 1):.1f} jobs each)"
    )
    agentq_ms, arq_ms = measured.full_runs.cpu_s * 1000 / runs, arq.redis_cpu_ms_per_run
    print(
        f"\nRedis CPU per run: {agentq_ms:.3f} ms; raw arq ({hop_budget.FULL_RUN_JOBS} no-op"
        f" jobs) {arq_ms:.3f} ms: {agentq_ms / arq_ms:.2f}x (goal <= 1.0x)"
    )
    # Redis's own time in the scripts (their inner commands included), less noisy than its
    # CPU on a loaded machine (no event loop, no sockets), and where a script's cost shows.
    scripts_us = measured.full_runs.usec.get("evalsha", 0) / runs
    print(
        f"  of which in scripts: {scripts_us:.0f} µs per run"
        f" ({measured.full_runs.calls.get('evalsha', 0) / runs:.1f} script calls)"
    )
    # Where it goes by command (every client's: the submits, the worker, the waits); a
    # script's inner commands are counted both under their own names and in `evalsha`.
    print("  by command, per run (calls, Redis's µs; inside Lua included):")
    full = measured.full_runs
    for name, n in sorted(full.calls.items(), key=lambda kv: -full.usec[kv[0]])[:12]:
        print(f"  {n / runs:6.2f}  {full.usec[name] / runs:6.1f}  {name}")
    steps = step_runs * core_bench.RUN_STEPS
    per_step = {k: v / steps for k, v in measured.steps.calls.items()}
    print(
        f"\nRedis commands per step ({step_runs} x {core_bench.RUN_STEPS}-step runs,"
        f" inside Lua included): {sum(per_step.values()):.1f} (goal <= 60)"
    )
    print(
        f"  {'calls':>6}  {'µs':>6}  command (µs: Redis's time in it, a script's inner ones"
        " included)"
    )
    for name, n in sorted(per_step.items(), key=lambda kv: -kv[1]):
        print(f"  {n:6.2f}  {measured.steps.usec[name] / steps:6.1f}  {name}")
    print("  by script (SLOWLOG: calls and Redis's µs per step):")
    for name, (calls, usec) in sorted(measured.step_scripts.items(), key=lambda kv: -kv[1][1]):
        print(f"  {calls / steps:6.2f}  {usec / steps:6.1f}  {name}")


def _figure(
    rounds: list[list[tuple[Fleet, Fleet]]], row: int, who: int, speed: bool
) -> tuple[float, float]:
    """A row's runs/s (speed) or CPU per run, agentq's (who 0) or raw arq's (1): its
    median over the rounds, and the median of its ratios to each round's first row."""

    def of(fleet: Fleet) -> float:
        return fleet.runs_per_s if speed else fleet.worker_cpu_ms_per_run

    med = statistics.median
    return (
        med(of(r[row][who]) for r in rounds),
        med(of(r[row][who]) / of(r[0][who]) for r in rounds),
    )


def _scaling(rounds: list[list[tuple[Fleet, Fleet]]]) -> None:
    """Issue 31's goal: worker CPU per run flat (+-10 %) as worker processes are added.
    Each round's ratios are against that round's first row (measured a minute apart at
    most), and the goal is read off their median across rounds."""
    print(
        "\nworker processes: runs/s and worker CPU per run (all processes), agentq against"
        " raw arq (4 no-op jobs a run) in the same run; goal: agentq's CPU per run within"
        f" +-10 % of its first row's (medians of {len(rounds)} round(s); 'x first' is the"
        " median of the rounds' own ratios)"
    )
    print(
        f"  {'procs':>5}  {'agentq runs/s':>13}  {'x first':>7}  {'CPU ms/run':>10}"
        f"  {'x first':>7}  {'arq runs/s':>10}  {'x first':>7}  {'CPU ms/run':>10}"
        f"  {'runs/s vs arq':>13}"
    )
    med = statistics.median
    for i, (agentq, _) in enumerate(rounds[0]):
        pairs = [r[i] for r in rounds]
        (runs, runs_x), (cpu, cpu_x) = _figure(rounds, i, 0, True), _figure(rounds, i, 0, False)
        (arq_runs, arq_x), (arq_cpu, _) = _figure(rounds, i, 1, True), _figure(rounds, i, 1, False)
        print(
            f"  {agentq.processes:5d}  {runs:13.0f}  {runs_x:6.2f}x  {cpu:10.2f}  {cpu_x:6.2f}x"
            f"  {arq_runs:10.0f}  {arq_x:6.2f}x  {arq_cpu:10.2f}"
            f"  {med(p[0].runs_per_s / p[1].runs_per_s for p in pairs):12.2f}x"
        )
    if len(rounds) < 2:
        return
    print("  CPU per run against the round's first row, round by round: median (range)")
    for i, (agentq, _) in enumerate(rounds[0][1:], start=1):
        for who, name in ((0, "agentq"), (1, "raw arq")):
            each = [
                r[i][who].worker_cpu_ms_per_run / r[0][who].worker_cpu_ms_per_run for r in rounds
            ]
            print(
                f"  {agentq.processes:5d}  {name:7}  {', '.join(f'{x:.2f}x' for x in each)}:"
                f" median {med(each):.2f}x ({min(each):.2f}-{max(each):.2f}x)"
            )
        # Context, not the goal: on a machine with fewer cores than processes, raw arq's
        # CPU per run grows too, and what grows for both is the machine's contention.
        each = [
            (r[i][0].worker_cpu_ms_per_run / r[0][0].worker_cpu_ms_per_run)
            / (r[i][1].worker_cpu_ms_per_run / r[0][1].worker_cpu_ms_per_run)
            for r in rounds
        ]
        print(
            f"  {agentq.processes:5d}  agentq's growth over raw arq's, by round:"
            f" {', '.join(f'{x:.2f}x' for x in each)}: median {med(each):.2f}x"
        )


def _fleets(
    args: argparse.Namespace, workers: int, *, report: bool, arq_first: bool
) -> tuple[Fleet, Fleet]:
    """One round's pair on `workers` processes, agentq's and raw arq's, in the given
    order; the per-command report, the step runs and the profile in the report round."""

    def arq_fleet() -> Fleet:
        with core_bench.redis_server() as url:
            return asyncio.run(_arq_fleet(url, args.runs, workers))

    arq = arq_fleet() if arq_first else None
    profile = ("sample" if args.sample else "cprofile" if args.profile else "") if report else ""
    measured, counts, out = _agentq(
        args.runs, workers, args.step_runs if report else 0, profile, args.wait
    )
    if arq is None:
        arq = arq_fleet()
    agentq = Fleet(
        workers,
        args.runs / measured.full_runs_s,
        measured.worker_cpu_s * 1000 / args.runs,
        measured.full_runs.cpu_s * 1000 / args.runs,
    )
    if report:
        _report(args.runs, workers, args.step_runs, measured, counts, arq)
    else:
        print(
            f"{workers} worker process(es), {'raw arq' if arq_first else 'agentq'} first:"
            f" agentq {agentq.runs_per_s:.0f} runs/s, {agentq.worker_cpu_ms_per_run:.2f} ms"
            f" CPU/run; raw arq {arq.runs_per_s:.0f} runs/s, {arq.worker_cpu_ms_per_run:.2f}"
            f" ms; TAKE replies claiming nothing per job"
            f" {counts.get(TAKE_EMPTY, 0) / (args.runs * hop_budget.FULL_RUN_JOBS):.2f};"
            f" load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    if profile == "sample":
        print("\nworker samples during the runs:")
        print(_sample_report(out + ".prof"))
    elif profile:
        for order in ("tottime", "cumulative"):
            text = io.StringIO()
            stats = pstats.Stats(out + ".prof", stream=text)
            stats.sort_stats(order).print_stats(25)
            print(f"\nworker profile during the runs, by {order}:")
            print(text.getvalue())
    return agentq, arq


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    rounds: list[list[tuple[Fleet, Fleet]]] = []
    taxes: list[dict[int, float]] = []
    for i in range(args.rounds):
        if i:
            print(f"\nround {i + 1} of {args.rounds}:", flush=True)
        rounds.append(
            [
                _fleets(args, workers, report=i == 0, arq_first=i % 2 == 1)
                for workers in args.workers
            ]
        )
        if len(args.workers) > 1:
            iterations = 50 if args.quick else 400
            taxes.append({n: _machine_tax(n, iterations) for n in args.workers})
    _scaling(rounds)
    if taxes:
        _machine(taxes)
    with core_bench.redis_server() as url:
        fixed = _fixed_costs(url, *((1, 200) if args.quick else (5, 3000)))
    print("\na transition's fixed cost (its script before its own body), µs per call:")
    for name in HOT:
        print(f"  {fixed[name]:6.2f}  {name} ({fixed[name] / fixed['none']:.1f}x a bare return)")
    print(f"  {fixed['none']:6.2f}  a script that only returns")
    with core_bench.redis_server() as url:
        lua = _prelude_cpu(url, *((1, 200) if args.quick else (5, 2000)))
    print(
        "\nthe same, its Lua alone: Redis's CPU per run of it, run many times in one script"
        " (µs; what defining it once, as a Redis Function, saves a call at most):"
    )
    for name in (*HOT, "TAKE"):
        if name in lua:
            print(f"  {lua[name]:6.2f}  {name}")
    print(f"  {lua['none']:6.2f}  a piece that sets one local")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
