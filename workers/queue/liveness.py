"""A worker process's lease: one short-lived key, renewed from a thread.

Jobs are leased to the worker, not each on its own TTL. A claimed job's
in-progress key names the worker that holds it, and the worker's one liveness
key (`aq:worker:ID`, TTL = the lease) says it is alive. When that key lapses,
any worker's reaper re-delivers the dead worker's jobs at once (`reap_lapsed`), so
recovery costs one lease whatever the calls' timeouts, and upkeep is one
command per worker process per renewal, not one per job.

The renewer is a thread with its own connection: an event loop blocked by a
tool cannot starve it. When a renewal cannot happen before the lease lapses
(Redis unreachable or stalled), or the key was found gone, the runtime is told
(`on_lapse`) and cancels its running jobs, which other workers may now run.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import redis
from redis import exceptions as redis_errors
from redis.asyncio import Redis

from agentq.orchestrator.concurrency import slots
from agentq.orchestrator.core import fairness, keys
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.redis.faults import Outage, is_transient

log = logging.getLogger("agentq.worker")

# Every loop of a worker process (claims, wake-ups, jobs, the reaper, this lease)
# reports Redis trouble here: an outage is one log line, and one when it ends.
OUTAGE = Outage("agentq worker", log)

REAPER = "aq:reaper"  # hash: when reapers last passed, and since when without a gap
ARQ_RETRY_PREFIX = "arq:retry:"  # arq's delivery counter (arq.constants.retry_key_prefix)
RETRY_KEEP_S = 88_400  # how long arq keeps a delivery counter


def liveness_key(worker_id: str) -> str:
    return f"aq:worker:{worker_id}"


def jobs_key(worker_id: str, partition: int = 0) -> str:
    """Hash: job id -> its lease record (its queue, wake-up list and score: see
    workers/queue/claims.py), for every job the worker holds in one partition (in the
    partition's slot, so a claim touches one slot)."""
    return keys.worker_jobs(worker_id, partition)


def holders_key(partition: int = 0) -> str:
    """Set: the workers that may hold jobs in a partition (what a reaper looks at)."""
    return keys.lease_holders(partition)


# A worker's jobs hash holds this field (no job id) while the worker is in the holders
# set: a claim writes both, a reaper deletes both, so a claim knows from its lease
# write's count of new fields whether the worker is listed (take.lua), with no SADD.
LISTED_MARK = "~listed"


def held_jobs(raw: Mapping[Any, Any]) -> dict[str, Any]:
    """A jobs hash as read (HGETALL): its jobs' lease records, without the mark."""
    held = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in raw.items()}
    held.pop(LISTED_MARK, None)
    return held


def lua_chunk() -> str:
    """The constants take.lua and reap_partition.lua read, as a Lua table."""
    return f"local LEASE = {{LISTED = {json.dumps(LISTED_MARK)}}}\n"


RENEW = scripts.script("agentq.workers.queue", "renew")
REAP_GATE = scripts.script("agentq.workers.queue", "reap_gate")
REAP_PARTITION = scripts.load(
    "agentq.workers.queue",
    ["reap_partition"],
    constants=fairness.lua_chunk() + slots.lua_chunk() + lua_chunk(),
)["reap_partition"]


class Reaping(NamedTuple):
    """What one reaper pass did and saw."""

    reaped: int  # jobs re-delivered
    # Whether any lease held a job when it looked (None: the gate let it not look). A
    # pass that saw none lets the next one wait longer (`Cadence.after`).
    in_flight: bool | None


async def reap_lapsed(redis: Redis, cadence: Cadence) -> int:
    """One reaper pass (`reap_pass`): how many jobs it re-delivered."""
    return (await reap_pass(redis, cadence)).reaped


async def reap_pass(redis: Redis, cadence: Cadence, me: str = "") -> Reaping:
    """One reaper pass: re-deliver the jobs of every worker (or remote lease) whose lease
    lapsed, partition by partition (each script touches one slot), and say whether any
    lease held a job.

    `me` is the reaping worker's own id while it holds its lease ('' for none): its own
    jobs need no look (it is alive; should it die, the process that takes the upkeep turn
    after it looks at them), so a worker listed alone among the holders costs the pass no
    second round trip, and its own jobs do not keep the passes quick.

    The liveness keys are read apart from the partitions' scripts (they live on other
    slots): a worker found dead stays dead to this pass; one whose lease lapses and is
    taken again within the pass may lose a claim it made meanwhile (it runs again
    elsewhere), as when it lapses just after a claim."""
    parts = list(keys.partitions())
    # The gate and the holders sets in one round trip: the sets are read for nothing when
    # the gate says not to look (another reaper looked within `look_ms`), which is rare
    # now that one process of a fleet passes (workers/worker/upkeep.py).
    gate = scripts.sha(REAP_GATE)
    for _ in range(2):
        async with redis.pipeline(transaction=False) as pipe:
            # (As a command: a cluster's pipeline refuses its `evalsha` method.)
            pipe.execute_command("EVALSHA", gate, 1, REAPER, *cadence.args())
            for p in parts:
                pipe.smembers(holders_key(p))
            replies = await pipe.execute(raise_on_error=False)
        if not isinstance(replies[0], redis_errors.NoScriptError):
            break
        await redis.script_load(REAP_GATE)  # Redis lost its scripts (a restart)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    if not replies[0]:
        return Reaping(0, None)
    members = replies[1:]
    held = [
        (p, worker_id)
        for p, ids in zip(parts, members, strict=True)
        for m in ids
        if (worker_id := m.decode() if isinstance(m, bytes) else str(m)) != me
    ]
    if not held:
        return Reaping(0, False)
    ids = sorted({worker_id for _, worker_id in held})
    # In the same round trip: how many fields each jobs hash holds. Its mark alone (one
    # field, `LISTED_MARK`: a record is always written with it) is a lease holding no job.
    async with redis.pipeline(transaction=False) as pipe:
        for worker_id in ids:
            pipe.exists(liveness_key(worker_id))
        for p, worker_id in held:
            pipe.hlen(jobs_key(worker_id, p))
        replies = await pipe.execute()
    alive = dict(zip(ids, replies[: len(ids)], strict=True))
    in_flight = any(int(fields) > 1 for fields in replies[len(ids) :])
    reap = redis.register_script(REAP_PARTITION)
    reaped = 0
    for p, worker_id in held:
        if not alive[worker_id]:
            reaped += int(
                await reap(
                    keys=[holders_key(p), jobs_key(worker_id, p)],
                    args=[
                        worker_id,
                        keys.ARQ_IN_PROGRESS_PREFIX,
                        ARQ_RETRY_PREFIX,
                        RETRY_KEEP_S,
                    ],
                )
            )
    return Reaping(reaped, in_flight)


# Renewals per lease while the process holds a job (a failed renewal is tried again
# that often), and while it holds none: its lease then guards nothing a reaper would
# re-deliver, and each renewal's wake-up is most of an idle worker's CPU.
RENEWALS_PER_LEASE = 5
IDLE_RENEWALS_PER_LEASE = 3
# The reaper's gap, in leases: under 1 - 1 / IDLE_RENEWALS_PER_LEASE (`reap_cadence`).
GAP_LEASES = 0.6


class Cadence(NamedTuple):
    """A reaper's timing (`REAP`'s arguments), the same for every reaper of a fleet
    (workers, `agentq serve`'s remote leases) so that their passes keep one clock."""

    every_s: float  # how often each reaper passes
    gap_ms: int  # passes further apart than this: Redis was away (a gap)
    steady_ms: int  # after a gap, nothing is reaped for this long
    look_ms: int  # one look at the workers per this long, whichever reaper passes
    # After a look that found no lease holding a job, the next pass waits this long (at
    # most a lease: see `after`).
    idle_every_s: float = 0.0

    def args(self) -> list[int]:
        return [self.gap_ms, self.steady_ms, self.look_ms]

    def after(self, seen: Reaping | None) -> float:
        """How long a reaper waits after a pass that saw `seen` (None: it failed).

        A look that found no job held anywhere waits `idle_every_s`, and this keeps the
        bound: a job held after that look was claimed after it, so its worker died after
        it too; the next look (within a lease of that death) sees the job and the passes
        are quick again, so the job is re-delivered within a lease and a pass of its
        worker's death, as when every pass is quick. Nothing else is slowed: a pass that
        saw a job, reaped one, did not look or failed is followed by a quick one."""
        if seen is not None and seen.in_flight is False and not seen.reaped:
            return max(self.every_s, self.idle_every_s)
        return self.every_s


def reap_cadence(lease_s: float) -> Cadence:
    """A dead worker's jobs run again within a lease and a pass of its death.

    The gap stays under the shortest time a live worker's key can outlast its last
    renewal (a lease less the longest renewal period, `LeaseRenewer.idle_interval_s`: a
    worker that claims while renewing at its idle pace renews next up to that long after
    its last renewal), so an outage long enough to let a live lease holding a job lapse
    always counts as a gap; after one, live workers get a whole lease to renew (a renewal
    period, plus its timeout, plus reconnecting) before anything is reaped. Within that
    bound it is as long as it can be: stamps (renewals, passes) further apart than it by
    a scheduling delay read as a gap, which holds the reaping back a lease."""
    every_s = min(1.0, lease_s / 4)
    gap_ms = int(max(2 * every_s, lease_s * GAP_LEASES) * 1000)
    return Cadence(
        every_s=every_s,
        gap_ms=gap_ms,
        steady_ms=max(gap_ms, int(lease_s * 1000)),
        look_ms=int(every_s * 1000 / 2),
        idle_every_s=lease_s,
    )


class Rider(Protocol):
    """Scripts a renewal carries in its round trip (the fleet's upkeep turn): each a
    (script, keys, args), its reply handed back after the renewal's."""

    def scripts(self) -> Sequence[tuple[str, Sequence[str], Sequence[Any]]]: ...

    def answered(self, replies: Sequence[Any]) -> None: ...


class LeaseRenewer:
    """Keeps `aq:worker:ID` alive from a thread; reports a lapse through `on_lapse`.

    `on_lapse` runs on the renewer's thread: it must hand over to the event loop
    itself (`loop.call_soon_threadsafe`).

    `holding` says whether the process holds a job (read from the renewer's thread):
    while it holds none, a renewal waits `idle_interval_s` for the next instead of
    `interval_s`. The key's TTL stays a lease, so a job claimed meanwhile is re-delivered
    within a lease of its worker's death as ever; the next renewal (at most the idle
    period after the last) sees the job and the pace is back. A failed renewal is tried
    again at the quick pace, whatever the process holds.
    """

    def __init__(
        self,
        client: redis.Redis,
        worker_id: str,
        lease_s: float,
        on_lapse: Callable[[str], object],
        rider: Rider | None = None,
        holding: Callable[[], bool] | None = None,
    ) -> None:
        self.client = client
        self.rider = rider
        self.worker_id = worker_id
        self.lease_s = lease_s
        self.on_lapse = on_lapse
        self.key = liveness_key(worker_id)
        self._renew = client.register_script(RENEW)
        self._loaded: set[str] = set()  # the rider's scripts Redis is known to hold
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentq-lease", daemon=True)
        # Renew five times per lease (three while holding no job); give up on the lease
        # a tenth of it before it lapses.
        self.interval_s = lease_s / RENEWALS_PER_LEASE
        self.idle_interval_s = lease_s / IDLE_RENEWALS_PER_LEASE
        self._holding = holding
        self._failing = False  # the last renewal failed
        self.margin_s = lease_s / 10
        self._valid_until = 0.0
        self._lapsed = False
        self._outage = OUTAGE

    def register(self) -> None:
        """Take the lease (blocking; call before claiming anything)."""
        sent = time.monotonic()
        self.client.set(self.key, self.worker_id, px=max(1, int(self.lease_s * 1000)))
        self._valid_until = sent + self.lease_s
        self._lapsed = False

    def start(self) -> None:
        self._thread.start()

    def held(self) -> bool:
        """Whether the lease is ours as far as this process can tell: claims stop when
        it is not (a claim no longer checks the liveness key: another slot)."""
        return not self._lapsed and time.monotonic() < self._valid_until - self.margin_s

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.lease_s)

    def _run(self) -> None:
        while not self._stop.wait(self.next_wait_s()):
            self.renew_once()

    def next_wait_s(self) -> float:
        """How long until the next renewal: the idle period after one that succeeded
        while the process held no job, else the quick one."""
        if self._holding is None or self._failing or self._holding():
            return self.interval_s
        return self.idle_interval_s

    def renew_once(self) -> None:
        sent = time.monotonic()
        try:
            renewed = self._renewed()
            if not renewed:
                if not self._lapsed:
                    self._lapse("the lease lapsed")
                self.register()
                renewed = 1
        except Exception as exc:
            if not is_transient(exc):
                log.exception("worker %s: renewing its lease failed", self.worker_id)
            self._outage.failed(exc)
            self._failing = True
            if not self._lapsed and time.monotonic() > self._valid_until - self.margin_s:
                self._lapse("the lease could not be renewed before it lapsed")
            return
        self._outage.succeeded()
        self._failing = False
        self._valid_until = sent + self.lease_s
        self._lapsed = False

    def _renewed(self) -> Any:
        """Renew, with the rider's scripts in the same round trip."""
        args: list[str | int] = [self.worker_id, int(self.lease_s * 1000)]
        rider = self.rider
        if rider is None:
            return self._renew(keys=[self.key], args=args)
        sent: list[tuple[str, Sequence[str], Sequence[Any]]] = [
            (RENEW, [self.key], args),
            *rider.scripts(),
        ]
        replies = self._send(sent)
        if any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
            self._loaded.clear()  # Redis lost its scripts (a restart): send them whole
            replies = self._send(sent)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        self._loaded.update(scripts.sha(source) for source, _, _ in sent)
        rider.answered(replies[1:])
        return replies[0]

    def _send(self, sent: Sequence[tuple[str, Sequence[str], Sequence[Any]]]) -> list[Any]:
        with self.client.pipeline(transaction=False) as pipe:
            for source, keys_, args_ in sent:
                # By hash once Redis is known to hold the script, whole until then.
                # (As commands: a cluster's pipeline refuses its `eval` methods.)
                if (sha := scripts.sha(source)) in self._loaded:
                    pipe.execute_command("EVALSHA", sha, len(keys_), *keys_, *args_)  # type: ignore[no-untyped-call]
                else:
                    pipe.execute_command("EVAL", source, len(keys_), *keys_, *args_)  # type: ignore[no-untyped-call]
            return list(pipe.execute(raise_on_error=False))

    def _lapse(self, why: str) -> None:
        self._lapsed = True
        try:
            self.on_lapse(why)
        except Exception:  # the runtime's trouble must not stop the renewals
            log.exception("worker %s: handling a lapsed lease failed", self.worker_id)
