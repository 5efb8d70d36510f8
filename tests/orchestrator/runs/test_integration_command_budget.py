"""What a step costs Redis inside the run's transitions, on a real redis-server: the
commands each hot transition's script runs (begin_step, commit_step, claim_call,
record_result), per step of a run with one call per step, and the run's create, counted
with MONITOR (a command a script runs is shown after the EVALSHA that ran it). Issue
31's budget: the meta fields a transition needs read in one HMGET by its guard (a cancel
at the step's end and a budget's hold included), a call's status and record in one (a
claim's result and a result's join plan included), a step's fields and calls in one HSET,
an event one XADD that Redis numbers; a job that starts (begin_step, claim_call) does
not move the run in the sweeper's index (the transition that handed it on did); create
writes its meta, tools and messages each in one command. The claim's own script (TAKE),
counted apart: a lane with ready work stays listed in its rings, so an enqueue into it
and a claim that leaves it non-empty write only the lane (core/fairness.py); a job put
back goes into its lane, so no claim sweeps the queue for such jobs; a job's end claims
nothing while its worker's claim loop waits on the wake-up list (docs/benchmarks.md,
"The claim's commands"), but claims for that loop the job its transition hands on, which
then pushes no wake-up token (the wake-up tokens are held too).

Redis's CPU goes per round trip and per script call more than per command inside one,
so the script calls are held too: each job runs its start and its end transition once,
and nothing else of the run's (a step's last text deltas ride in its commit, not in an
`emit` of their own)."""

from __future__ import annotations

import asyncio
import collections
import hashlib
import itertools
import threading
from typing import Any

import pytest
import redis

from agentq import tool
from agentq.orchestrator.client import Client
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.runs.store import load_scripts
from agentq.workers.queue.claims import TAKE, TAKE_RIDING, ending
from agentq.workers.tools.function import FunctionExecutor
from agentq.workers.worker.runtime import WorkerRuntime
from tests.support.specs import calls, scripted

pytestmark = pytest.mark.integration

STEPS = 10
HOT = ("begin_step", "commit_step", "claim_call", "record_result")
# Inner commands of the four per step (a run of 10 steps, one call each; its creation and
# end included): 82 before issue 31's cuts, 62 after them, 65.3 once a step-end cancel,
# batch budgets and held runs added theirs, 63.3 with an enqueue's SET NX; 57.0 with the
# guards reading what a step's end, a budget's hold and a claimed call's result need,
# and the join its plan, in the reads they already made, and a begun step's history read
# without its length when the few messages the worker lacks are all there is; 55.0 with
# a run's own jobs enqueued into the lane its guard read (fair.lua's second read of the
# meta gone), 53.0 with a wake-up list trimmed only past its bound; 44.8 with the moving
# index scored at most once a second per run, a result recorded with its status and the
# pending count in one HSET (its write-once check read with the call), a begun step found
# committed in the meta and a run's end reading the meta once; 40.6 with an event one
# XADD that Redis numbers (`0-*`: no HINCRBY of a counter beside it); 34.7 once the
# queue's only lane stayed listed when drained (an enqueue into it writes only the lane:
# no ZCARD and no RPUSH to the two rings); 33.7 with a step's tool-results reference
# carrying its call order (begin_step resolves it with one HMGET of the results, no HGET
# of the order); 32.6 with a re-delivered commit found by the guard's read of the meta's
# COMMITTED (no HSETNX of the step's resp); 31.6 with a claim by a worker that holds the
# run's tools (it ran a model step of the run: one worker here) reading no tool. A run
# slower than a second per move scores the index on every move again (TIME and ZADD in
# commit_step and record_result, 4 a step): 35.6 then, which the budget holds too; 30.0
# (34.0 slow) once a job's end handed the next job to its worker's claim loop waiting on
# that job's queue (the transition pushes no wake-up token for it: `TOKEN_BUDGET`).
BUDGET = 34
# A step whose model reports usage (tokens in, out, cached and reasoning: five totals with
# `total`, and one more unpriced step) adds to the run's totals and its tenant's: ten
# HINCRBYs (42.6) when each count was one; 34.6 with the run's counts added to the meta
# fields its guard read and written in the meta's one HSET, the tenant's in one HMGET and
# one HSET; 33.6 with the claims' tool held; 31.7 with the next job handed off (no
# token). Its budget keeps the same 4 for a slow run.
STEP_USAGE = {
    "input_tokens": 10,
    "output_tokens": 5,
    "cached_input_tokens": 2,
    "reasoning_tokens": 1,
}
USAGE_BUDGET = 36
# Inner commands of the run's `create` (its meta, tools and messages each in one write):
# 28 before, 19 after; 15 with its `start` event one XADD (one to spare).
CREATE_BUDGET = 16
# Inner commands of the claims (TAKE) per step, the ended jobs' ends included: 81.8 when
# a lane left and rejoined its ring on every claim and enqueue, 71.3 with the two-level
# rings listing exactly the lanes with work, 60.4 once jobs put back went straight into
# their lanes (no sweep of the queue per claim), a claim took its in-progress key with
# SET NX, an end trusted its lease record and a claim that found the ring empty dropped
# no tokens, 58.3 once a first delivery counted in one SET NX, 53.9 once a call read the
# earliest timer first and the clock only when it has one to compare, 49.7 once a walk
# that empties the last lane of the last tenant dropped both rings and the tokens in one
# DEL; 30.0-30.4 once a job's end claimed nothing while its worker's claim loop waited
# on the wake-up list (those ends found the queue empty: a run's next job goes to the
# other queue), a busy worker's claims looked at the timer set once per 100 ms of its
# clock, a done job without a concurrency key deleted its lease record unread, a live
# run's job skipped the abort set, a one-job lane went in the rings' DEL, the claim took
# a job out of the ready range in the write that says it was there, counted no delivery
# (a reaper counts a death) and checked a tool against the set sent with the call (the
# timer looks follow the clock: 1 to spare); 32.1 once the queue's only lane stayed
# listed when drained (the claim removes its job from the lane and drops the tokens in
# two writes instead of one DEL of the lane, the rings and the tokens: the enqueues save
# three a job); 30.4 once a claim behind a wake-up token that took the one job its token
# was for left the token list be; 28.2 once a claim listed its worker among the holders
# only when its jobs hash lacked the listing's mark (the count of new fields in its lease
# write says so), not with a SADD per claim; 24.2-24.8 once a claim read the lane its
# worker's last claim found to be the queue's only one first, and no ring while that
# lane's mark (fair.lua) said it still was; 22.3-22.5 once a job's end behind its
# transition ran as the script under Lua's shebang (refused whole by a full Redis, as the
# transition was), not with a denied SADD of its own.
TAKE_BUDGET = 24
# Wake-up tokens pushed (LPUSH, in a script or not) per step: 2.2 while every enqueue
# pushed one (each woke its queue's claim loop, a BLPOP, in the same worker: a model
# step's job goes to the tools queue, a call's result's to the model queue); 0.1 (the
# create's) once a job's end handed the job its transition enqueued to the claim loop of
# its worker waiting on that queue, claimed in the same round trip, with no token (a
# hand-off missed while that loop's fallback poll comes back pushes one).
TOKEN_BUDGET = 0.5


@tool
async def nothing() -> str:
    """Does nothing."""
    return "ok"


def _watch(url: str, seen: list[dict[str, Any]], stop: str, ready: threading.Event) -> None:
    with redis.Redis.from_url(url).monitor() as monitor:  # type: ignore[no-untyped-call]
        ready.set()
        for command in monitor.listen():
            seen.append(command)
            if stop in command["command"]:
                return


def _transitions() -> dict[str, str]:
    """The run transitions' scripts by SHA1: each, and each with a job's end inside it
    (claims.ending: a job that claims nothing ends in its last transition's call)."""
    names = {}
    for name, src in load_scripts().items():
        names[hashlib.sha1(src.encode()).hexdigest()] = name
        if (ended := ending(src)) is not None:
            names[hashlib.sha1(ended.encode()).hexdigest()] = f"{name}{ENDED}"
    return names


# What a transition's name carries when the call ended a job too (its last commands).
ENDED = "+end"


def _script_calls(seen: list[dict[str, Any]]) -> collections.Counter[str]:
    """The run transitions' scripts run (EVALSHA from a client), by name: a call refused
    before it ran (NOSCRIPT, the first of each script on a fresh Redis) runs no command."""
    names = {sha: name.removesuffix(ENDED) for sha, name in _transitions().items()}
    counts: collections.Counter[str] = collections.Counter()
    for command, after in itertools.pairwise(seen):
        words = command["command"].split(" ")
        ran = after.get("client_type") == "lua"
        if words[0].upper() == "EVALSHA" and words[1] in names and ran:
            counts[names[words[1]]] += 1
    return counts


# A job's end inside its transition (workers/queue/lua/job_end.lua): its commands, last
# to first (the GET only when the lease record was gone), counted as the claim's (TAKE).
_END_COMMANDS = ("ZREM", "DEL", "GET", "HDEL")


def _end_of(group: list[str]) -> int:
    """How many of a call's inner commands (their names, in order) are a job's end."""
    n = 0
    for name in _END_COMMANDS:
        if n < len(group) and group[-1 - n] == name:
            n += 1
        elif name != "GET":
            return 0
    return n


def _inner_by_script(seen: list[dict[str, Any]]) -> collections.Counter[str]:
    names = _transitions()
    # a job's end behind its last transition runs the same script under Lua's shebang
    names |= {hashlib.sha1(src.encode()).hexdigest(): "TAKE" for src in (TAKE, TAKE_RIDING)}
    counts: collections.Counter[str] = collections.Counter()
    current = ""
    group: list[str] = []

    def close() -> None:
        ended = _end_of(group) if current.endswith(ENDED) else 0
        counts[current.removesuffix(ENDED)] += len(group) - ended
        counts["TAKE"] += ended

    for command in seen:
        words = command["command"].split(" ")
        if command.get("client_type") == "lua":
            group.append(words[0].upper())
            continue
        close()
        current, group = "", []
        if words[0].upper() == "EVALSHA":
            current = names.get(words[1], "other")
    close()
    return counts


@pytest.mark.parametrize(
    ("usage", "budget"), [(None, BUDGET), (STEP_USAGE, USAGE_BUDGET)], ids=["no-usage", "usage"]
)
async def test_a_step_runs_at_most_its_budget_of_commands_in_the_run_transitions(
    redis_url: str, usage: dict[str, int] | None, budget: int
) -> None:
    runtime = WorkerRuntime(
        redis_url, executors=[FunctionExecutor([nothing])], queues=[MODEL_QUEUE, TOOLS_QUEUE]
    )
    await runtime.start()
    seen: list[dict[str, Any]] = []
    stop, ready = "budget-test-stop", threading.Event()
    watcher = threading.Thread(target=_watch, args=(redis_url, seen, stop, ready), daemon=True)
    try:
        async with Client(redis_url) as client:
            spec = scripted(
                *[{**calls(("nothing", {})), "usage": usage} for _ in range(STEPS)],
                {"text": "done"},
                tools=["nothing"],
                max_steps=STEPS + 1,
            )
            watcher.start()
            await asyncio.to_thread(ready.wait, 10)
            run_id = await client.runs.submit(spec)
            result = await client.runs.wait(run_id, timeout_s=60)
            assert result.status == "succeeded"
            await client.redis.get(stop)
            await asyncio.to_thread(watcher.join, 10)
    finally:
        await runtime.stop()
    counts = _inner_by_script(seen)
    per_step = {name: counts[name] / STEPS for name in HOT}
    assert all(per_step.values()), per_step  # each was seen
    assert sum(per_step.values()) <= budget, (sum(per_step.values()), per_step)
    assert counts["create"] <= CREATE_BUDGET, counts["create"]
    assert counts["TAKE"] / STEPS <= TAKE_BUDGET, counts["TAKE"] / STEPS
    tokens = sum(c["command"].split(" ")[0].upper() == "LPUSH" for c in seen)
    assert tokens / STEPS <= TOKEN_BUDGET, tokens / STEPS
    # 11 model jobs (the last answers in text, streamed) and 10 tool jobs: 44 script calls
    # (45 while the last step's deltas were an `emit` of their own).
    assert _script_calls(seen) == {
        "create": 1,
        "begin_step": STEPS + 1,
        "commit_step": STEPS + 1,
        "claim_call": STEPS,
        "record_result": STEPS,
    }
