"""Runtime faults: workers SIGKILLed and SIGTERMed, Redis killed, stopped and filled,
during batches of runs (see fleet.py). Each test prints its figures (`-s`)."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import redis

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import RunTimeoutError
from agentq.orchestrator.runs.result import RunResult
from agentq.workers.queue.liveness import held_jobs
from tests.support.fleet import (
    Figures,
    aof_redis,
    batch_spec,
    median,
    run_batch,
    start_workers,
)
from tests.support.infra import REPO, TOOLS, RedisServer, WorkerProcess
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.faults

LEASE_S = 1.0  # tests/support/infra.py gives every worker AGENTQ_LEASE_S=1 (the default)


@pytest.fixture
def fleet() -> Iterator[list[WorkerProcess]]:
    workers: list[WorkerProcess] = []
    yield workers
    for worker in workers:
        worker.stop()


@pytest.fixture
def server() -> Iterator[RedisServer]:
    redis_server = aof_redis()
    yield redis_server
    redis_server.stop()


def jobs_snapshot(url: str) -> dict[str, object]:
    """Where every job is: queues (scores), holders, in-progress keys (their holder)."""
    r = redis.Redis.from_url(url, decode_responses=True)
    try:
        return {
            key: (
                r.zrange(key, 0, -1, withscores=True)
                if r.type(key) == "zset"
                else r.hgetall(key)
                if r.type(key) == "hash"
                else r.get(key)
                if r.type(key) == "string"
                else r.type(key)
            )
            for pattern in ("aq:queue:*", "aq:worker:*", "arq:in-progress:*", "aq:lease:*")
            for key in r.scan_iter(pattern)
        }
    finally:
        r.close()


def report(figures: Figures, name: str, **extra: object) -> None:
    print(figures.line(name, **extra), file=sys.stderr)


def assert_clean(figures: Figures) -> None:
    assert figures.succeeded == figures.runs, figures.failures[:5]
    assert figures.wrong_results == 0, figures.failures[:5]
    assert figures.duplicate_results == 0
    assert figures.duplicate_steps == 0
    assert figures.event_gaps == 0
    assert figures.worker_died_reports == 0


# -- workers SIGKILLed ----------------------------------------------------------------


# A storm kills one job's worker at most this often. At the end of a batch its last
# jobs gather on one worker (a dead worker's jobs all go to the next claim), and a
# seeded schedule of random kills can follow them there five times running: the
# poison-call limit (AGENTQ_MAX_DELIVERIES, 5) then turns a call into an error, as it
# should, and the run is no longer the storm's to judge. That limit has its own tests.
KILLS_PER_JOB = 3


class Killer(threading.Thread):
    """SIGKILLs a random worker every 1-2 s and starts a replacement; measures how long
    the victim's jobs take to be held by another worker (or end). A worker holding a job
    already killed `KILLS_PER_JOB` times is spared."""

    def __init__(self, url: str, fleet: list[WorkerProcess]) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.fleet = fleet
        self.admin = redis.Redis.from_url(url, decode_responses=True)
        self.rng = random.Random(14)
        self.done = threading.Event()
        self.kills = 0
        self.spared = 0
        self.deaths: Counter[str] = Counter()  # job id -> kills of a worker holding it
        self.recoveries: list[float] = []
        self._pending: list[tuple[float, str, set[str]]] = []

    def run(self) -> None:
        next_kill = time.monotonic() + self.rng.uniform(1, 2)
        while not self.done.is_set():
            self._check_recoveries()
            if time.monotonic() >= next_kill:
                self._kill_one()
                next_kill = time.monotonic() + self.rng.uniform(1, 2)
            time.sleep(0.02)

    def _kill_one(self) -> None:
        alive = [w for w in self.fleet if w.proc.poll() is None]
        if len(alive) < 2:
            return
        for victim in self.rng.sample(alive, len(alive)):
            victim.pause()  # claims nothing more while its jobs are read
            worker_id, held = self._holding(victim)
            if all(self.deaths[job] < KILLS_PER_JOB for job in held):
                break
            victim.resume()
            self.spared += 1
        else:
            return
        victim.kill()
        killed_at = time.monotonic()
        self.kills += 1
        self.deaths.update(held)
        if worker_id and held:
            self._pending.append((killed_at, worker_id, held))
        self.fleet.append(WorkerProcess(self.url, "--tools", TOOLS))

    def _holding(self, worker: WorkerProcess) -> tuple[str | None, set[str]]:
        """The worker's id and the jobs it holds (none before it took its lease)."""
        # redis-py types its sync replies as `Awaitable[X] | X`: these are lists.
        found = cast(list[str], self.admin.keys(f"aq:worker:*-{worker.pid}-*"))
        ids = [k.split(":")[2] for k in found]
        if not ids:
            return None, set()
        raw = cast(dict[str, str], self.admin.hgetall(f"aq:worker:{ids[0]}:jobs"))
        return ids[0], set(held_jobs(raw))

    def _check_recoveries(self) -> None:
        still: list[tuple[float, str, set[str]]] = []
        for killed_at, victim, held in self._pending:
            open_jobs = {
                job
                for job in held
                if self.admin.exists(f"arq:job:{job}")
                and self.admin.get(f"arq:in-progress:{job}") in (None, victim)
            }
            if open_jobs:
                still.append((killed_at, victim, open_jobs))
            else:
                self.recoveries.append(time.monotonic() - killed_at)
        self._pending = still


async def test_sigkill_a_random_worker_every_1_to_2_s(
    server: RedisServer, fleet: list[WorkerProcess]
) -> None:
    fleet += start_workers(server.url, 4)
    killer = Killer(server.url, fleet)
    started = time.monotonic()
    killer.start()
    try:
        figures, _ = await run_batch(server.url, 150, nap_s=0.5, timeout_s=400)
    finally:
        killer.done.set()
        killer.join(10)
    report(
        figures,
        "sigkill-workers",
        kills=killer.kills,
        spared=killer.spared,
        median_recovery_s=median(killer.recoveries),
        max_recovery_s=round(max(killer.recoveries, default=0), 2),
        lease_s=LEASE_S,
        seconds=round(time.monotonic() - started, 1),
    )
    assert_clean(figures)
    assert killer.kills > 0


async def test_a_worker_paused_past_its_lease_mid_batch(
    server: RedisServer, fleet: list[WorkerProcess]
) -> None:
    """SIGSTOP a worker holding calls for four leases, then SIGCONT it: its calls run
    again elsewhere meanwhile, and once resumed it finds its lease lapsed and lets go of
    them; every run ends once, with each call's result recorded once."""
    fleet += start_workers(server.url, 3)
    victim = fleet[0]
    admin = redis.Redis.from_url(server.url, decode_responses=True)
    held: list[int] = []

    async def pause_victim() -> None:
        await asyncio.sleep(1.5)  # the batch is under way
        (key,) = cast(list[str], admin.keys(f"aq:worker:*-{victim.pid}-*:jobs")) or [""]
        held.append(len(held_jobs(cast(dict[str, str], admin.hgetall(key)))) if key else 0)
        victim.proc.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(4 * LEASE_S)
        finally:
            victim.proc.send_signal(signal.SIGCONT)

    pauser = asyncio.create_task(pause_victim())
    # Long enough that the victim is resumed mid-batch, and serves the rest of it.
    figures, _ = await run_batch(server.url, 100, nap_s=1.0, timeout_s=300)
    await pauser
    # Its lease lapsed: on resuming, it let go of its calls and said so.
    await eventually_async(lambda: "they will run again" in victim.log(), "the victim's lapse")
    lapses = victim.log().count("they will run again")
    report(figures, "paused-worker", held_when_paused=held, lease_lapse_log_lines=lapses)
    assert_clean(figures)
    assert held[0] > 0
    assert lapses >= 1, victim.log()
    assert all(w.proc.poll() is None for w in fleet), [w.log() for w in fleet]


# -- Redis killed, restarted, stopped, filled ---------------------------------------------


def redis_chaos(
    server: RedisServer,
    plan: list[tuple[float, float]],
    submitted: threading.Event,
    done: threading.Event,
) -> None:
    """Once the batch is submitted, for each (wait_s, down_s): wait, SIGKILL Redis,
    restart it after down_s."""
    submitted.wait()
    for wait_s, down_s in plan:
        if done.wait(wait_s):
            return
        server.kill()
        time.sleep(down_s)
        server.start()


async def test_redis_sigkilled_mid_batch_and_restarted_after_4_s(
    server: RedisServer, fleet: list[WorkerProcess]
) -> None:
    fleet += start_workers(server.url, 3)
    pids = [w.pid for w in fleet]
    submitted, done = threading.Event(), threading.Event()
    # 2 s after the last submit: it is on disk (appendfsync everysec) and the batch runs.
    chaos = threading.Thread(target=redis_chaos, args=(server, [(2.0, 4.0)], submitted, done))
    chaos.start()
    try:
        figures, _ = await run_batch(server.url, 60, nap_s=1.0, timeout_s=300, submitted=submitted)
    finally:
        done.set()
        submitted.set()  # a batch that failed to submit: the chaos has nothing to do
        chaos.join(30)
    report(figures, "redis-sigkill-4s", restarted_workers=0)
    assert_clean(figures)
    assert [w.pid for w in fleet] == pids
    assert all(w.proc.poll() is None for w in fleet), [w.log() for w in fleet]


async def test_one_second_redis_outages_every_4_s(
    server: RedisServer, fleet: list[WorkerProcess]
) -> None:
    fleet += start_workers(server.url, 3)
    submitted, done = threading.Event(), threading.Event()
    plan = [(2.0, 1.0), (3.0, 1.0), (3.0, 1.0)]
    chaos = threading.Thread(target=redis_chaos, args=(server, plan, submitted, done))
    chaos.start()
    try:
        figures, _ = await run_batch(server.url, 60, nap_s=1.5, timeout_s=300, submitted=submitted)
    finally:
        done.set()
        submitted.set()  # a batch that failed to submit: the chaos has nothing to do
        chaos.join(30)
    outage_lines = sum(w.log().count("redis unavailable") for w in fleet)
    report(figures, "redis-1s-outages", outages=3, workers=3, outage_log_lines=outage_lines)
    assert_clean(figures)
    assert all(w.proc.poll() is None for w in fleet)


def cli(*args: str, url: str) -> subprocess.Popen[str]:
    import os

    return subprocess.Popen(
        [sys.executable, "-m", "agentq", *args, "--redis", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


async def test_redis_sigstopped_for_10_s(
    server: RedisServer, fleet: list[WorkerProcess], tmp_path: Path
) -> None:
    fleet += start_workers(server.url, 2)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(batch_spec(0)))
    async with Client(server.url) as client:
        ids = [await client.runs.submit(batch_spec(i, 1.0)) for i in range(20)]
        async for event in client.runs.events(ids[-1], follow=True):
            if event.type == "tool-running":
                break
        server.pause()
        try:
            started = time.monotonic()
            commands = {
                "submit": cli("submit", str(spec_path), "--timeout", "3", url=server.url),
                "wait": cli("wait", ids[0], "--timeout", "3", url=server.url),
                "events": cli("events", ids[0], "--follow", "--timeout", "3", url=server.url),
                "cancel": cli("cancel", "no-such-run", "--timeout", "3", url=server.url),
            }
            client_started = time.monotonic()
            client_wait = asyncio.create_task(client.runs.wait(ids[0], timeout_s=3))
            client_ended: list[float] = []
            client_wait.add_done_callback(lambda _: client_ended.append(time.monotonic()))
            outcomes: dict[str, tuple[int, str, float]] = {}
            while len(outcomes) < len(commands):
                for name, proc in commands.items():
                    if name not in outcomes and proc.poll() is not None:
                        _, err = proc.communicate()
                        outcomes[name] = (proc.returncode, err.strip(), time.monotonic() - started)
                assert time.monotonic() - started < 60, "a command did not end"
                await asyncio.sleep(0.05)
            with pytest.raises(RunTimeoutError):
                await client_wait
            client_s = client_ended[0] - client_started
            # The pause is the fault itself: 10 s from when it began.
            await asyncio.sleep(max(0.0, 10 - (time.monotonic() - started)))
        finally:
            server.resume()
        waits = await asyncio.gather(
            *(client.runs.wait(r, timeout_s=120) for r in ids), return_exceptions=True
        )
        stuck = [r for r, w in zip(ids, waits, strict=True) if isinstance(w, BaseException)]
        # What a run that did not finish was waiting on, for the failure to explain itself.
        assert not stuck, (
            [await client.runs.status(r) for r in stuck],
            jobs_snapshot(server.url),
            [w.log()[-4000:] for w in fleet],
        )
        results = [cast(RunResult, w) for w in waits]

    slowest = max(s for _, _, s in outcomes.values())
    lapses = sum(w.log().count("could not be renewed") for w in fleet)
    print(
        f"FAULTS redis-sigstop-10s: client_timeout_s={client_s:.1f} "
        f"slowest_cli_s={slowest:.1f} (timeout 3 s, includes interpreter start; "
        f"{ {name: round(o[2], 1) for name, o in outcomes.items()} }) "
        f"succeeded={sum(r.status == 'succeeded' for r in results)}/{len(results)} "
        f"lease_lapse_log_lines={lapses}",
        file=sys.stderr,
    )
    for name, (code, err, _) in outcomes.items():
        assert code == 4, (name, code, err)  # timed out (--timeout)
        assert len(err.splitlines()) == 1, (name, err)
        assert "Traceback" not in err
    assert all(r.status == "succeeded" for r in results), [r.error for r in results]
    assert all(w.proc.poll() is None for w in fleet)
    # Leases (1 s) could not be renewed for 10 s: each worker cancelled its jobs, said so.
    assert all("could not be renewed" in w.log() for w in fleet), [w.log() for w in fleet]


async def test_maxmemory_reached_mid_batch(
    server: RedisServer, fleet: list[WorkerProcess], tmp_path: Path
) -> None:
    fleet += start_workers(server.url, 2)
    admin = redis.Redis.from_url(server.url)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(batch_spec(0)))
    refused: list[subprocess.CompletedProcess[str]] = []
    submitted = threading.Event()

    async def fill_then_free() -> None:
        # Once the batch is in (a full Redis refuses the batch's own submits too).
        await eventually_async(submitted.is_set, "the batch to be submitted", 120)
        admin.config_set("maxmemory", "1")
        proc = cli("submit", str(spec_path), url=server.url)
        out, err = proc.communicate(timeout=60)
        refused.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
        await asyncio.sleep(2.0)  # the fault lasts 2 s
        admin.config_set("maxmemory", "0")

    chaos = asyncio.create_task(fill_then_free())
    figures, _ = await run_batch(server.url, 40, nap_s=1.0, timeout_s=300, submitted=submitted)
    await chaos
    (submit,) = refused
    report(figures, "maxmemory", refused_submit_exit=submit.returncode)
    assert submit.returncode == 3, submit.stderr
    assert len(submit.stderr.strip().splitlines()) == 1, submit.stderr
    assert_clean(figures)
    assert all(w.proc.poll() is None for w in fleet)


# -- workers SIGTERMed ------------------------------------------------------------------


async def test_rolling_sigterm_of_every_worker(
    server: RedisServer, fleet: list[WorkerProcess]
) -> None:
    fleet += start_workers(server.url, 3)
    originals = list(fleet)
    drains: list[float] = []
    codes: list[int | None] = []

    async def roll() -> None:
        await asyncio.sleep(1.0)  # the batch is under way
        for old in originals:
            fleet.extend(await asyncio.to_thread(start_workers, server.url, 1))
            began = time.monotonic()
            old.terminate()
            codes.append(await asyncio.to_thread(old.proc.wait, 60))
            drains.append(time.monotonic() - began)

    roller = asyncio.create_task(roll())
    figures, ids = await run_batch(server.url, 60, nap_s=1.0, timeout_s=300)
    await roller
    async with Client(server.url) as client:
        longest = 0.0
        for run_id in ids:
            running: dict[str, float] = {}
            async for e in client.runs.events(run_id):
                if e.type == "tool-running":
                    running.setdefault(e.tool_call_id or "", e.at)
                elif e.type == "tool-result" and e.tool_call_id in running:
                    longest = max(longest, e.at - running[e.tool_call_id or ""])
    report(
        figures,
        "rolling-sigterm",
        exit_codes=codes,
        max_drain_s=round(max(drains), 2),
        longest_call_s=round(longest, 2),
        nap_s=1.0,
    )
    assert_clean(figures)
    assert codes == [0, 0, 0]
    assert figures.counted_deliveries == 0
    assert longest < 30  # the default drain timeout: no call waited for a re-delivery
