"""How a worker takes jobs from a queue and gives them back: one Lua call each way.

A queue is arq's sorted set of job ids scored by when each is due. A claimed job
stays in the set (a queue's depth still counts it) but its score becomes +inf, so it
leaves the ready range: no other worker's claim ever reads it again. Its lease is the
in-progress key, which names the holder, and an entry in the holder's jobs hash, whose
value (a lease record) says where the job goes back when the holder dies or releases
it: its queue, its wake-up list and the score it had.

`TAKE` does a worker's whole per-job bookkeeping in one round trip: it ends the job
the worker just ran (done: arq's cleanup; release: back into its lane at its old due
time, or a timer when deferred), then claims up to the worker's free slots and returns
each claimed job's payload and delivery count (what arq's `run_job` would fetch in its
own round trip). Only deaths count toward AGENTQ_MAX_DELIVERIES: a claim counts no
delivery, and the reaper that puts back a dead worker's job counts the one that died
(arq's retry key holds the deliveries that died; a remote lease's holder counts its own,
which its record says). A job whose run was cancelled before it started, or whose
payload expired, is cleaned up there and never reaches the worker. A job's end claims
nothing while the worker's claim loop waits on the wake-up list (the waiting claim
takes whatever becomes ready), so the end of a job whose run goes on in another queue
(most) reads no queue, and needs no TAKE call: it goes inside the job's last
transition's own script (`ending`, `job_end.lua`) when the job's lease names no
concurrency key. The job its transition hands on is claimed in the same round trip
instead, when a claim loop of the same process waits on that job's queue with a slot
kept for it: the transition pushes no token for that job (enqueue.lua's `rider_wake`),
and a TAKE for that loop rides behind the end's (`arq_worker._HandOff`); a hop then
costs no LPUSH and no BLPOP.

Timers (jobs due later: a parked call's deadline) wait in the queue's timer set, not in
the queue (`core/queued_job.py`); TAKE moves those fallen due into the queue before it
claims, so no sweeper is needed and the queue holds only ready and running work. A busy
worker's claims look at the timer set once per `TIMER_LOOK_S` of its clock (sooner when
a claim saw or set a timer falling due), and any claim that finds no ready work looks:
an idle worker's fallback poll finds timers fallen due as before.

Fairness (orchestrator/core/fairness.py): a ready job also waits in its lane, a sorted
set per fairness key of a tenant, by rank (its due time less what its run's priority is
worth); the queue's ring lists the tenants with ready work and each tenant's ring its
keys with ready work. TAKE takes round-robin over the tenants (their deployment weight
in jobs a turn), within a tenant's turns round-robin over its keys (their spec weight),
each lane's best-ranked job first; the enqueue puts a job in its lane (and scores it
below every due time in the queue: `INDEXED_OFFSET_MS`), and so does whatever puts a job
back at the time it was due (a release, a reaper, a give-back, a held job's slot freed,
a timer fallen due: `fair_put_back`), so a claim never looks for ready jobs outside the
lanes. A lane entry whose job is no longer ready is dropped when the claim meets it, so
nothing that ends or cancels a job needs to know about lanes.

Routing by tool: a job's payload says what a worker must serve to run it (its
`needs`, a registry key: `ToolKindPlugin.needs`), and TAKE claims only jobs whose needs
are in the worker's tool set (a set key named by the set's digest, in the partition:
`publish_tool_set`). Other jobs stay where they are, ready, for workers that serve
them: pools with different tools share a queue (a rolling deploy that adds a tool), and
a job only new workers can run waits for them. The check is one SISMEMBER per job looked
at; a claim looks at most `LOOKAHEAD` jobs past those it takes, so its cost grows
neither with the number of tools nor of workers.

Every key TAKE touches is in one partition (`core/keys.py`): the queue, wake-up list,
jobs hash, holders set, abort set and timer set of the partition, and the jobs it claims (their
ids carry the partition's tag), so a claim touches one Redis Cluster slot. Whether the
worker's lease is held (its liveness key, on another slot) is the caller's to say.

A claim's reply can be lost while Redis still runs it (the call timed out while Redis
was stalled, or its connection dropped): its jobs are then held by a live worker that
never started them, and no reaper frees them (the lease is renewed). Each claim carries
a number from the worker's `ClaimLedger`, kept in its lease records; `Taker.give_back`
returns the jobs of settled claims the worker is not running.

Wake-up tokens stay a hint of ready work: a claim that leaves ready jobs behind
(the worker is full) makes sure a token is there for other workers; so does one that
passes over jobs for tools it lacks, since the token it popped may have been theirs
(but only for jobs it had not passed over before: a worker alone awake does not spin
on its own token); a claim that empties the ready range (takes or drops its last jobs)
drops the tokens, so no worker wakes for nothing; one that finds it empty already has
nothing to drop (whatever listed work since pushed a token for it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from agentq.orchestrator.concurrency import slots
from agentq.orchestrator.core import fairness
from agentq.orchestrator.core import keys as state_keys
from agentq.orchestrator.core.keys import ARQ_IN_PROGRESS_PREFIX, ARQ_JOB_PREFIX
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import Ride, text
from agentq.orchestrator.redis.acks import acknowledged, pipeline_to
from agentq.orchestrator.runs.state.status import TERMINAL_STATUSES, MetaField
from agentq.workers.queue import liveness
from agentq.workers.queue.liveness import ARQ_RETRY_PREFIX, holders_key, jobs_key


def _runs_chunk() -> str:
    """What the claim reads of a run's meta to know it has not ended (its abort marks
    come with its end): the status field, and the statuses that end a run, each between
    bars (a flat table: folded into the script as literals, no table built per call)."""
    ended = "|" + "".join(f"{s}|" for s in sorted(TERMINAL_STATUSES))
    status = json.dumps(str(MetaField.STATUS))
    return f"local RUNS = {{STATUS = {status}, ENDED = {json.dumps(ended)}}}\n"


_CONSTANTS = fairness.lua_chunk() + slots.lua_chunk()
TAKE = scripts.load(
    "agentq.workers.queue", ["take"], constants=_CONSTANTS + _runs_chunk() + liveness.lua_chunk()
)["take"]
# The TAKE that rides behind a job's last transition (its end): the same script declared
# with Lua's shebang and no flags, which Redis refuses whole when it is full (over
# maxmemory), as it refused the transition before it: the job is not ended then (it
# stays held, to be released), and the script needs no denied write of its own to say so.
TAKE_RIDING = "#!lua\n" + TAKE
# A job's done end, for a job whose lease names no concurrency key, as it runs behind a
# transition inside that transition's own script (`ending`).
_JOB_END = scripts.fold(
    scripts.expand(
        "local JOB_END = {"
        f"PROGRESS = {json.dumps(ARQ_IN_PROGRESS_PREFIX)}, RETRY = {json.dumps(ARQ_RETRY_PREFIX)}, "
        f"JOB = {json.dumps(ARQ_JOB_PREFIX)}}}\n" + scripts.read("agentq.workers.queue", "job_end")
    )
)


@functools.cache
def ending(transition: str) -> str | None:
    """A transition's script that also ends, once it returned, the job that sent it
    (`job_end.lua`: its KEYS and ARGV follow the transition's own; `Taker.end_in`): the
    end of a job that claims nothing then costs no TAKE call of its own. None for a
    script that cannot carry it (scripts.followed)."""
    return scripts.followed(transition, _JOB_END)


# How often a busy worker's claims look at a queue's timer set (jobs due later) at the
# least, by its own clock: sooner when a claim saw or set one falling due, and at any
# claim that finds no ready work.
TIMER_LOOK_S = 0.1
# How many ready jobs a claim may pass over (jobs for tools the worker lacks) in one call.
LOOKAHEAD = 64
# A tool set this small travels in each claim call, which then reads no set key per job.
INLINE_TOOLS = 32
# How long a worker's set of jobs it passed over is kept (it only spares wake-ups).
PASSED_KEEP_S = 600
CLAIM_ONE = scripts.load("agentq.workers.queue", ["claim_one"], constants=_CONSTANTS)["claim_one"]
GIVE_BACK = scripts.load("agentq.workers.queue", ["give_back"], constants=_CONSTANTS)["give_back"]


def record_head(queue_key: str, wake_key: str) -> str:
    """A lease record up to its claim number (`Taker.args` appends it and `"s":`; the
    claim appends the score and the brace)."""
    return json.dumps({"q": queue_key, "w": wake_key}, separators=(",", ":"))[:-1] + ',"c":'


def record_prefix(queue_key: str, wake_key: str) -> str:
    """A lease record up to its score, for a holder that numbers no claims and counts
    its own deliveries (a remote service's lease: `claim_one`; `"d"` tells a reaper the
    delivery is counted already)."""
    return f'{record_head(queue_key, wake_key)}0,"d":1,"s":'


def lease_wake_key(raw: bytes | str) -> str:
    """The wake-up list a jobs-hash entry (a lease record) names."""
    return str(json.loads(raw)["w"])


# The entry of a job's ctx through which its last run transition ends the job in its own
# round trip (TAKE pipelined behind it; workers/worker/runtime.py sets it). Absent, the
# transition goes alone and the worker ends the job after it.
JOB_RIDE = "agentq_ride"


def job_ride(ctx: Mapping[str, Any]) -> Ride | None:
    """What the job passes to its last transition (`RunStore.commit_step`, `record_result`)."""
    ride: Ride | None = ctx.get(JOB_RIDE)
    return ride


class ClaimLedger:
    """Numbers a worker's claim calls and knows which may still be answered.

    A claim is open from when its arguments are built until its call returned or
    raised; once settled, every job it took is running here or its reply was lost."""

    def __init__(self) -> None:
        self._last = 0
        self._open: set[int] = set()

    def open(self) -> int:
        self._last += 1
        self._open.add(self._last)
        return self._last

    def settle(self, claim: int) -> None:
        self._open.discard(claim)

    def settled_through(self) -> int:
        """The highest number up to which every claim has settled."""
        return min(self._open) - 1 if self._open else self._last


@dataclass(frozen=True)
class Claimed:
    """A job a claim handed to this worker, with what arq would fetch to run it."""

    job_id: str
    score: int
    payload: bytes
    deliveries: int
    # Whether its lease names a concurrency key (its end then reads the lease record).
    keyed: bool = True


def parse_take(reply: list[Any]) -> tuple[bool, list[Claimed]]:
    """(whether ready jobs were left behind, the jobs claimed)."""
    more = bool(int(reply[0]))
    claimed = [
        Claimed(
            job_id=text(reply[i]),
            score=int(float(text(reply[i + 1]))),
            payload=reply[i + 2] if isinstance(reply[i + 2], bytes) else str(reply[i + 2]).encode(),
            deliveries=int(reply[i + 3]),
            keyed=bool(int(reply[i + 4])),
        )
        for i in range(3, len(reply), 5)
    ]
    return more, claimed


def tool_set_digest(tools: Iterable[str]) -> str:
    return hashlib.sha1("\n".join(sorted(set(tools))).encode()).hexdigest()[:16]


async def publish_tool_set(redis: Redis, tools: Iterable[str]) -> None:
    """Write a tool set's key in every partition (idempotent: the workers of one set
    share it). A worker publishes its sets at start and with every announcement, so a
    Redis that lost its data learns them again."""
    served = sorted(set(tools))
    if not served:
        return  # an empty set is a key that does not exist: it serves nothing
    digest = tool_set_digest(served)
    async with redis.pipeline(transaction=False) as pipe:
        for p in state_keys.partitions():
            pipe.sadd(state_keys.tool_set(digest, p), *served)
        await pipe.execute()


class Taker:
    """TAKE for one worker on one queue in one partition: its keys, its fixed arguments,
    and the call (alone, or behind a BLPOP on the wake-up list in the same round trip)."""

    def __init__(
        self,
        redis: Redis,
        worker_id: str,
        queue: str,
        partition: int,
        backstop_ms: int,
        leased: Callable[[], bool] = lambda: True,
        tools: Iterable[str] = (),
        *,
        timer_look_s: float = TIMER_LOOK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.redis = redis
        self.worker_id = worker_id
        self.partition = partition
        queue_key = state_keys.queue(queue, partition)
        self.queue_key = queue_key
        self.wake_key = wake_key = state_keys.wake(queue, partition)
        self.sha = scripts.sha(TAKE)
        self.riding_sha = scripts.sha(TAKE_RIDING)
        served = sorted(set(tools))
        self.keys = [
            queue_key,
            wake_key,
            jobs_key(worker_id, partition),
            holders_key(partition),
            state_keys.abort_set(partition),
            state_keys.timers(queue, partition),
            # What the worker serves on this queue: jobs needing anything else are left.
            state_keys.tool_set(tool_set_digest(served), partition),
            # What its last claim left for others: leaving them again wakes nobody.
            state_keys.worker_passed(worker_id, queue, partition),
        ]
        self._record_head = record_head(queue_key, wake_key)
        inline = len(served) <= INLINE_TOOLS and not any("\n" in t for t in served)
        self._tools_inline = "\n" + "".join(f"{t}\n" for t in served) if inline else ""
        self._backstop_ms = backstop_ms
        self.leased = leased
        # Claims made at the fallback poll's timeout rather than at a wake-up token.
        self.backstop_wakes = 0
        self._timer_look_s = timer_look_s
        self._clock = clock
        self._timers_due = clock()  # when a claim next looks at the timer set
        # The lane its last claim found to be the queue's only one (take.lua reads it
        # first, and the rings only when it no longer is): '' for none known.
        self._only_lane = ""

    def args(
        self,
        n: int,
        ended: str = "",
        how: str = "done",
        defer_ms: int = 0,
        *,
        riding: bool = False,
        claim: int = 0,
        keyed: bool = True,
    ) -> list[Any]:
        """TAKE's arguments; `claim` is the call's number in the worker's ClaimLedger;
        `keyed` False when the ended job's claim said its lease names no concurrency key."""
        look = False
        if n > 0:
            now = self._clock()
            look = now >= self._timers_due
            if look:
                self._timers_due = now + self._timer_look_s
        return [
            "1" if self.leased() else "",
            self.worker_id,
            n,
            self._backstop_ms,
            ARQ_IN_PROGRESS_PREFIX,
            ARQ_JOB_PREFIX,
            ARQ_RETRY_PREFIX,
            f'{self._record_head}{claim},"s":',
            ended,
            how,
            defer_ms,
            "1" if riding else "",
            LOOKAHEAD,
            PASSED_KEEP_S,
            "1" if look else "",
            "" if keyed else "1",
            self._tools_inline,
            self._only_lane,
        ]

    def end_in(self, job_id: str) -> tuple[list[str], list[str]]:
        """The KEYS and ARGV a transition's script from `ending` takes after its own, to
        end this worker's job `job_id` of this taker's queue."""
        return [self.keys[2], self.queue_key], [self.worker_id, job_id]

    def taken(self, reply: list[Any]) -> tuple[bool, list[Claimed]]:
        """A TAKE reply read: a timer it saw or set brings the next look forward."""
        next_timer_ms = int(reply[1])
        if next_timer_ms >= 0:
            due = self._clock() + next_timer_ms / 1000
            self._timers_due = min(self._timers_due, due)
        self._only_lane = text(reply[2])
        return parse_take(reply)

    async def take(self, args: list[Any]) -> tuple[bool, list[Claimed]]:
        # A claim or an end counts once the replicas have it (acks.py), like a transition.
        if args[11] == "1":  # riding behind a transition (sent alone only in tests)
            sha, source = self.riding_sha, TAKE_RIDING
        else:
            sha, source = self.sha, TAKE
        return self.taken(await acknowledged(self.redis, sha, source, self.keys, args))

    async def wait_and_take(self, timeout_s: int, args: list[Any]) -> tuple[bool, list[Claimed]]:
        """BLPOP a wake-up token (up to `timeout_s`), then claim at once, in one round
        trip: Redis runs the claim as soon as the token is popped, or at the timeout
        (the fallback poll, which finds deferred jobs fallen due)."""
        async with pipeline_to(self.redis, self.wake_key) as (pipe, acks):
            pipe.blpop([self.wake_key], timeout=timeout_s)
            # Behind a token (TAKE's ARGV[19]): a claim that drains the queue's only lane
            # leaves the tokens be when it took the one job its token was for.
            pipe.evalsha(self.sha, len(self.keys), *self.keys, *args, "1")
            waited, role = acks.add(pipe, self.wake_key)
            popped, reply, *acked = await pipe.execute(raise_on_error=False)
        if popped is None:
            self.backstop_wakes += 1
        if isinstance(reply, NoScriptError):
            return await self.take(args)
        if isinstance(reply, BaseException):
            raise reply
        acks.check(waited, role, [reply, *acked])
        return self.taken(reply)

    async def give_back(self, settled_through: int, running: Iterable[str]) -> int:
        """Release the jobs this worker holds on this queue in the partition from claims
        up to `settled_through` that it is not running (their claim's reply was lost)."""
        script = self.redis.register_script(GIVE_BACK)
        args: list[str | int] = [
            self.worker_id,
            ARQ_IN_PROGRESS_PREFIX,
            self.queue_key,
            settled_through,
            *running,
        ]
        return int(await script(keys=[self.keys[2]], args=args))
