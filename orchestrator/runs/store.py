"""The run store: every change to a run is one atomic Lua transition.

The Python side builds a typed input (`orchestrator/runs/state/inputs.py`) from the pure
core's decisions; the Lua side checks the run is in the state the transition expects
and applies it whole, then answers with one typed reply. A re-delivered job therefore
finds its transition applied and does nothing. Redis errors leave the store only as
`InfrastructureError`, with `retryable` saying whether trying again may help.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunNotFoundError
from agentq.orchestrator.core.events import (
    TERMINAL_EVENTS,
    Event,
    stored_output,
    stream_seq,
    with_output,
)
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.core.run_ids import ParentLink, child_run_id, run_trace_id
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import Ride, Store, resolved, text, texts
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.definitions import stored_tool
from agentq.orchestrator.runs.index import RunSummary, summarize
from agentq.orchestrator.runs.state import (
    INPUTS,
    TERMINAL_STATUSES,
    BeginStep,
    BeginStepReply,
    Cancel,
    CancelReply,
    ClaimCall,
    ClaimCallReply,
    CommitStep,
    CreateRun,
    Emit,
    EmitReply,
    ExpireParked,
    FailRun,
    HoldStep,
    InputAnswer,
    InputRequest,
    MetaField,
    Outcome,
    PostResult,
    RecordResult,
    Redrive,
    RedriveReply,
    Reply,
    ResolveApproval,
    RunFailure,
    StartQueued,
    StepField,
    TransitionInput,
    WorkflowRecord,
    call_field,
    lua_constants,
)
from agentq.orchestrator.runs.state.history import referenced_step, resolve_messages
from agentq.orchestrator.runs.state.inputs import DEFAULT_RETENTION_S
from agentq.orchestrator.runs.state.status import (
    CHILD_COST_FIELDS,
    CHILD_USAGE_FIELDS,
    COST_FIELDS,
    USAGE_FIELDS,
)
from agentq.orchestrator.runs.state.usage import rolled_up_usage
from agentq.orchestrator.tools import ToolAnnouncement, registry_key
from agentq.orchestrator.tools.announcements import ANNOUNCEMENT_TTL_S
from agentq.orchestrator.tools.workflow import WorkflowToolConfig

__all__ = ["DEFAULT_RETENTION_S", "RunStore", "load_scripts"]


def load_scripts() -> scripts.Scripts:
    """Each transition's full source: generated constants, the prelude, its own file."""
    return scripts.load(
        "agentq.orchestrator.runs",
        (model.script for model in INPUTS),
        constants=lua_constants.render(),
        prelude="prelude",
    )


_SCRIPTS = load_scripts()

# The meta fields a run's rolled-up usage is read from (the status first: whether it is).
_USAGE_READ: tuple[str, ...] = (
    MetaField.STATUS,
    *USAGE_FIELDS.values(),
    *COST_FIELDS.values(),
    *CHILD_USAGE_FIELDS.values(),
    *CHILD_COST_FIELDS.values(),
    MetaField.UNPRICED,
    MetaField.CHILD_UNPRICED,
)

R = TypeVar("R", bound=Reply)

# A transition's outcomes that ended its run (the worker's phases call run_ended on them).
_ENDED = frozenset((Outcome.FINISHED, Outcome.FAILED))
# How long a run's end notice outlives the last waiter that made it ready (`watch_end`):
# a waiter renews it each time it looks again, and a waiter that comes after the end
# reads the status, so it need not last the run's retention.
END_NOTICE_TTL_S = 300
# The consumer group a waiter makes a run's end notice with (never read as a group).
_END_WAITERS = "waiters"


class RunStore(Store):
    retention_s: int

    def __init__(self, redis: Redis, *, retention_s: int = DEFAULT_RETENTION_S) -> None:
        super().__init__(redis, _SCRIPTS, retention_s=retention_s)
        # Told (run id, meta) of each run this process ends (runs/ended.py).
        self.end_listeners: list[Callable[[str, Mapping[str, str]], None]] = []
        # Told the id of each run a transition applied here ended, as its reply comes
        # (before `end_listeners`, which wait for the run's meta), in the applier's task.
        self.ended_here: list[Callable[[str], None]] = []

    async def _apply(
        self, transition: TransitionInput, reply: type[R], *, ride: Ride | None = None
    ) -> R:
        if ride is not None and (wake := ride.takes_from(transition.carried_jobs())):
            transition = transition.model_copy(update={"rider_wake": wake})
        applied = await self._send(
            transition.script, keys.run_keys(transition.run_id), transition, reply, ride=ride
        )
        if self.ended_here and applied.outcome in _ENDED:
            for told in self.ended_here:
                told(transition.run_id)
        return applied

    async def _with_outputs(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Put back the outputs a page's result events refer to (events.OUTPUT_REF): each
        is its call's result in the step's hash, read in one round trip for the page."""
        refs = [i for i, body in enumerate(bodies) if stored_output(body) is not None]
        if not refs:
            return bodies
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for i in refs:
                    body = bodies[i]
                    pipe.hget(
                        keys.step(body["run_id"], int(body["step"])),
                        call_field(StepField.RESULT, body["tool_call_id"]),
                    )
                results = await pipe.execute()
        for i, result in zip(refs, results, strict=True):
            output = json.loads(result).get("output") if result is not None else None
            bodies[i] = with_output(bodies[i], output)
        return bodies

    # -- transitions (see orchestrator/runs/lua/*.lua for each one's replies) -----------

    async def create(self, transition: CreateRun) -> Reply:
        return await self._apply(transition, Reply)

    async def start_queued(self, transition: StartQueued) -> Reply:
        return await self._apply(transition, Reply)

    async def create_many(self, transitions: list[CreateRun]) -> list[Reply]:
        """Create many runs in one round trip (one per node of a cluster)."""
        return await self._send_many(
            CreateRun.script, [(keys.run_keys(t.run_id), t) for t in transitions], Reply
        )

    async def begin_step(self, transition: BeginStep) -> BeginStepReply:
        """The step begins; the reply carries the history from `start` on, whole."""
        begun = await self._apply(transition, BeginStepReply)
        if begun.outcome != Outcome.OK or begun.start + len(begun.messages) >= begun.length:
            return begun
        # Many messages to send: read here, as stored (no JSON encoding of them all inside
        # the transition). Entries are written once and only this step's commit appends
        # the next ones, so these are the messages the step began with.
        messages = await self.history(transition.run_id, transition.step, begun.start, begun.length)
        return begun.model_copy(update={"messages": messages})

    async def history(self, run_id: str, step: int, start: int, length: int) -> list[str]:
        """Messages `start` to `length` of the run at step `step`, as the model sees them
        (each tool message resolved from the step it refers to, which is before `step`)."""
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.lrange(keys.messages(run_id), start, length - 1)
                for n in range(step):
                    pipe.hgetall(keys.step(run_id, n))
                replies = await pipe.execute()
        steps = [texts(r) for r in replies[1:]]
        return resolve_messages([text(m) for m in replies[0]], steps)

    async def commit_step(self, transition: CommitStep, *, ride: Ride | None = None) -> Reply:
        """`ride`: the caller sends the transition, with what it adds (a worker's job end)."""
        return await self._apply(transition, Reply, ride=ride)

    async def claim_call(self, transition: ClaimCall) -> ClaimCallReply:
        return await self._apply(transition, ClaimCallReply)

    async def record_result(self, transition: RecordResult, *, ride: Ride | None = None) -> Reply:
        """`ride`: the caller sends the transition, with what it adds (a worker's job end)."""
        return await self._apply(transition, Reply, ride=ride)

    async def resolve_approval(self, transition: ResolveApproval) -> Reply:
        return await self._apply(transition, Reply)

    async def post_result(self, transition: PostResult) -> Reply:
        return await self._apply(transition, Reply)

    async def expire_parked(self, transition: ExpireParked) -> Reply:
        return await self._apply(transition, Reply)

    async def input_request(self, transition: InputRequest) -> Reply:
        return await self._apply(transition, Reply)

    async def input_answer(self, transition: InputAnswer) -> Reply:
        return await self._apply(transition, Reply)

    async def workflow_record(self, transition: WorkflowRecord) -> Reply:
        return await self._apply(transition, Reply)

    async def workflow_outcomes(self, run_id: str, step: int, call_id: str) -> dict[str, str]:
        """A workflow call's node outcomes so far (node id -> NodeOutcome JSON)."""
        return await self._hash(keys.workflow(run_id, step, call_id))

    async def emit(self, run_id: str, events: Sequence[str]) -> int:
        """Append events to a live run; the last seq, or 0 if the run has ended."""
        if not events:
            return 0
        return (await self.append(Emit(run_id=run_id, events=list(events)))).seq

    async def append(self, transition: Emit) -> EmitReply:
        """`emit` with its typed reply."""
        return await self._apply(transition, EmitReply)

    async def hold_step(self, transition: HoldStep) -> Reply:
        """A shared budget holds the begun step (hold_step.lua)."""
        return await self._apply(transition, Reply)

    async def fail_run(self, run_id: str, failure: RunFailure) -> Reply:
        return await self._apply(FailRun(run_id=run_id, error=failure), Reply)

    async def cancel(
        self, run_id: str, reason: str | None, *, at_step_end: bool = False
    ) -> CancelReply:
        cancel = Cancel(run_id=run_id, reason=reason, at_step_end=at_step_end)
        return await self._apply(cancel, CancelReply)

    async def join_tree(self, child_id: str) -> int:
        """Count a child run in its run tree (idempotent: a re-delivered start counts it
        once); the runs the tree holds or was refused, its top run included."""
        key = keys.tree(run_trace_id(child_id))
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.sadd(key, child_id)
                pipe.expire(key, self.retention_s)
                pipe.scard(key)
                _, _, children = await pipe.execute()
        return 1 + int(children)

    async def count_tree_step(self, run_id: str, step: int) -> int:
        """Count a run's model step in its run tree (idempotent: a re-delivered step
        counts once); the steps the tree's runs began, this one included. A set, not a
        counter, for that idempotence: it holds at most the tree's ceiling and the steps
        refused past it (each ends its run)."""
        key = keys.tree_steps(run_trace_id(run_id))
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.sadd(key, f"{run_id}:{step}")
                pipe.expire(key, self.retention_s)
                pipe.scard(key)
                _, _, steps = await pipe.execute()
        return int(steps)

    async def redrive(self, transition: Redrive) -> RedriveReply:
        return await self._apply(transition, RedriveReply)

    async def wait_answer(self, run_id: str, request_id: str, timeout_s: float) -> str | None:
        """Block until the answer to an input request is posted (or the timeout passes)."""
        return await self._pop_answer(keys.answer(run_id, request_id), timeout_s)

    # -- reads ---------------------------------------------------------------

    async def tenant_load(self, tenant: str) -> dict[int, tuple[int, int]]:
        """A limited tenant's runs (in flight, queued) in each partition (one round trip;
        core/tenant_limits.py)."""
        fields = [keys.TENANT_IN_FLIGHT + tenant, keys.TENANT_QUEUED + tenant]
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for partition in keys.partitions():
                    pipe.hmget(keys.tenant_load(partition), fields)
                counts = await pipe.execute()
        return {
            partition: (int(in_flight or 0), int(queued or 0))
            for partition, (in_flight, queued) in zip(keys.partitions(), counts, strict=True)
        }

    async def batch_lines_in_flight(self, tenant: str) -> int:
        """The tenant's batch lines admitted and not ended (the batch admission's count:
        its share of the tenant's max_in_flight)."""
        with redis_errors_mapped():
            count = await resolved(
                self.redis.hget(keys.batch_sched(tenant), keys.BATCH_SCHED_IN_FLIGHT)
            )
        return int(count or 0)

    async def meta(self, run_id: str) -> dict[str, str]:
        return await self._record(keys.meta(run_id), RunNotFoundError(f"no run with id {run_id!r}"))

    async def head(
        self, run_id: str, fields: Sequence[str] | None = None
    ) -> tuple[dict[str, str], int]:
        """The run's meta (only `fields` of it, when given) and its last event's sequence
        number, read at one moment (one slot's MULTI): a reader that sees the run live
        follows its events from there. The number is the stream's last id (no counter is
        kept: machine/lua/emit.lua); a stream trimmed empty reads 0, and following from 0
        then misses nothing. RunNotFoundError when there is no such run."""
        meta_key = keys.meta(run_id)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                if fields is None:
                    pipe.hgetall(meta_key)
                else:
                    pipe.hmget(meta_key, list(fields))
                pipe.xrevrange(keys.events(run_id), count=1)
                found, last = await pipe.execute()
        if fields is None:
            meta = texts(found)
        else:
            meta = {f: text(v) for f, v in zip(fields, found, strict=True) if v is not None}
        if not meta:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return meta, stream_seq(text(last[0][0])) if last else 0

    async def call_state(
        self, run_id: str, step: int, call_id: str
    ) -> tuple[str | None, str | None]:
        """The call's record and status, for building transitions from outside."""
        fields = [call_field(StepField.CALL, call_id), call_field(StepField.CALL_STATUS, call_id)]
        with redis_errors_mapped():
            call, status = await resolved(self.redis.hmget(keys.step(run_id, step), fields))
        return (text(call) if call else None, text(status) if status else None)

    async def call_result(self, run_id: str, step: int, call_id: str) -> str | None:
        """The call's recorded result (a ToolResultPart's JSON), or None while it has none."""
        with redis_errors_mapped():
            found = await resolved(
                self.redis.hget(keys.step(run_id, step), call_field(StepField.RESULT, call_id))
            )
        return text(found) if found is not None else None

    async def agent_children(self, run_id: str) -> list[str]:
        """The ids of the child runs the run's current step started or is starting (its
        calls of `agent` tools, and the nodes of its workflow calls that run as child
        runs: a workflow's llm nodes with tools)."""
        meta = await self.meta(run_id)
        step = int(meta.get(MetaField.STEP, "0"))
        with redis_errors_mapped():
            raw = await resolved(self.redis.hgetall(keys.step(run_id, step)))
            tools = await resolved(self.redis.hgetall(keys.tools(run_id)))
        fields = texts(raw)
        # Per tool name: None for an agent (the call's child), else the nodes run as children.
        starts: dict[str, list[str] | None] = {}
        for name, tool_json in tools.items():
            tool = stored_tool(tool_json)
            if tool.kind == "agent":
                starts[text(name)] = None
            elif isinstance(tool.config, WorkflowToolConfig) and tool.config.children:
                starts[text(name)] = sorted(tool.config.children)
        children: list[str] = []
        for call_id in json.loads(fields.get(StepField.ORDER, "[]")):
            call = json.loads(fields.get(call_field(StepField.CALL, call_id), "{}"))
            name = call.get("name")
            if name not in starts:
                continue
            nodes = starts[name]
            if nodes is None:
                children.append(child_run_id(run_id, step, call_id))
            else:
                link = ParentLink(run_id=run_id, step=step, call_id=call_id)
                children += [link.model_copy(update={"node": n}).child_id for n in nodes]
        return children

    async def exists(self, run_id: str) -> bool:
        with redis_errors_mapped():
            return bool(await resolved(self.redis.exists(keys.meta(run_id))))

    async def existing(self, run_ids: Iterable[str]) -> set[str]:
        """Those of `run_ids` that are runs (one round trip; each in its own slot)."""
        wanted = list(run_ids)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for run_id in wanted:
                    pipe.exists(keys.meta(run_id))
                found = await pipe.execute()
        return {run_id for run_id, n in zip(wanted, found, strict=True) if n}

    async def statuses(self, run_ids: Iterable[str]) -> dict[str, str]:
        """The status of each of `run_ids` that is a run (one round trip)."""
        wanted = list(run_ids)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for run_id in wanted:
                    pipe.hget(keys.meta(run_id), MetaField.STATUS)
                found = await pipe.execute()
        return {r: text(st) for r, st in zip(wanted, found, strict=True) if st is not None}

    async def summaries(self, run_ids: Iterable[str]) -> dict[str, RunSummary]:
        """A list's line for each of `run_ids` that is a run (one round trip)."""
        wanted = list(run_ids)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for run_id in wanted:
                    pipe.hgetall(keys.meta(run_id))
                found = await pipe.execute()
        return {
            run_id: summarize(run_id, {text(k): text(v) for k, v in raw.items()})
            for run_id, raw in zip(wanted, found, strict=True)
            if raw
        }

    async def usages(self, run_ids: Iterable[str]) -> dict[str, Usage]:
        """What each of `run_ids` that is a run used, its sub-agents' and workflows'
        included (`rolled_up_usage`, as its parent is charged), in one round trip."""
        wanted = list(run_ids)
        fields = list(_USAGE_READ)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for run_id in wanted:
                    pipe.hmget(keys.meta(run_id), fields)
                found = await pipe.execute()
        usages: dict[str, Usage] = {}
        for run_id, values in zip(wanted, found, strict=True):
            if values[0] is None:
                continue  # no such run (expired with its retention)
            meta = {f: text(v) for f, v in zip(fields, values, strict=True) if v is not None}
            usages[run_id] = rolled_up_usage(meta)
        return usages

    async def tool_def(self, run_id: str, name: str) -> str | None:
        with redis_errors_mapped():
            raw = await resolved(self.redis.hget(keys.tools(run_id), name))
        return text(raw) if raw else None

    async def tool_defs(self, run_id: str) -> list[str]:
        """The run's frozen tool definitions (JSON), for readers such as `agentq run`."""
        raw = await resolved(self.redis.hgetall(keys.tools(run_id)))
        return [text(v) for v in raw.values()]

    async def snapshot(
        self, run_id: str, *, resolved: bool = True
    ) -> tuple[dict[str, str], list[str], list[dict[str, str]]]:
        """Meta, messages and every step hash, for assembling a RunResult. The messages
        are as the model saw them (`resolved`), or as stored: a tool message is then a
        reference to its step (state/history.py), for a fork that copies the steps."""
        meta = await self.meta(run_id)
        last = int(meta.get(MetaField.STEP, "0"))
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.lrange(keys.messages(run_id), 0, -1)
                for n in range(last + 1):
                    pipe.hgetall(keys.step(run_id, n))
                replies = await pipe.execute()
        by_index = [texts(r) for r in replies[1:]]
        messages = [text(m) for m in replies[0]]
        if resolved:
            messages = resolve_messages(
                messages, await self._with_later_steps(run_id, by_index, messages)
            )
        return meta, messages, [s for s in by_index if s]

    async def _with_later_steps(
        self, run_id: str, steps: list[dict[str, str]], entries: list[str]
    ) -> list[dict[str, str]]:
        """`steps`, extended by the hashes of the steps the history refers to beyond it:
        a live run may have joined another step between the meta and the history read."""
        last = max((n for e in entries if (n := referenced_step(e)) is not None), default=-1)
        if last < len(steps):
            return steps
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for n in range(len(steps), last + 1):
                    pipe.hgetall(keys.step(run_id, n))
                later = await pipe.execute()
        return steps + [texts(r) for r in later]

    async def status_of(self, run_id: str) -> str:
        """The run's status alone (one HGET); RunNotFoundError when there is no such run."""
        with redis_errors_mapped():
            status = await resolved(self.redis.hget(keys.meta(run_id), MetaField.STATUS))
        if status is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        return text(status)

    async def events(
        self, run_id: str, after: int = 0, *, follow: bool = False, block_ms: int = 5000
    ) -> AsyncIterator[Event]:
        """Events after `after`; with `follow`, keep waiting until a terminal event (what
        follows one is a late report, such as webhook-failed, read without waiting)."""
        if follow:
            # An ended run's stream is complete: read what is left, do not block.
            follow = not await self._ended(run_id)
        async for event in self._events(
            keys.events(run_id),
            after,
            follow=follow,
            block_ms=block_ms,
            end_events=TERMINAL_EVENTS,
            ended=lambda: self._ended(run_id),
        ):
            yield event

    async def watch_end(self, run_id: str) -> str:
        """The run's status, and its end notice made ready for a waiter (one MULTI on the
        run's slot): a stream its end writes its status to (runs/lua/prelude.lua,
        `ended_key`). A waiter makes it empty, by a consumer group's MKSTREAM (no entry
        added, so the stream's last id stays 0-0 and no other waiter blocked on it is
        woken, nor anything trimmed); a waiter that finds it made adds nothing (BUSYGROUP).
        The notice lives `END_NOTICE_TTL_S` from each call. RunNotFoundError when there is
        no such run."""
        notice = keys.ended(run_id)
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.xgroup_create(notice, _END_WAITERS, id="0", mkstream=True)
                pipe.expire(notice, END_NOTICE_TTL_S)
                pipe.hget(keys.meta(run_id), MetaField.STATUS)
                made, _, status = await pipe.execute(raise_on_error=False)
            for reply in (made, status):
                if isinstance(reply, Exception) and not str(reply).startswith("BUSYGROUP"):
                    raise reply
            if status is None:
                await resolved(self.redis.delete(notice))
                raise RunNotFoundError(f"no run with id {run_id!r}")
        return text(status)

    async def end_notice(self, run_id: str, block_ms: int) -> str | None:
        """The status the run ended with, from its end notice (`watch_end`), waiting up to
        `block_ms` for it; None until then."""
        with redis_errors_mapped():
            reply = await self.redis.xread({keys.ended(run_id): "0-0"}, count=1, block=block_ms)
        if not reply:
            return None
        ((_, entries),) = reply
        if not entries:
            return None  # (woken with nothing: the wait looks again)
        fields = entries[0][1]
        return text(fields[b"e"] if b"e" in fields else fields["e"])

    async def _ended(self, run_id: str) -> bool:
        return await self.status_of(run_id) in TERMINAL_STATUSES

    # -- the tool registry -----------------------------------------------------

    async def announce(self, announcements: Sequence[ToolAnnouncement]) -> None:
        """Publish (refresh) tools; drop those nobody announced within the TTL. The
        registry itself expires when no worker has announced for that long."""
        if not announcements:
            return
        now = time.time()
        mapping: dict[str | bytes, str | bytes | int | float] = {
            registry_key(a): a.model_copy(update={"seen_at": now}).model_dump_json()
            for a in announcements
        }
        stale = [
            key
            for key, ann in (await self.announced()).items()
            if key not in mapping and now - ann.seen_at > ANNOUNCEMENT_TTL_S
        ]
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(keys.REGISTRY, mapping=mapping)
                if stale:
                    pipe.hdel(keys.REGISTRY, *stale)
                pipe.expire(keys.REGISTRY, int(ANNOUNCEMENT_TTL_S))
                await pipe.execute()

    async def withdraw(self, registry_keys: Sequence[str]) -> None:
        """Drop announcements a stopping process served alone."""
        if registry_keys:
            with redis_errors_mapped():
                await self.redis.hdel(keys.REGISTRY, *registry_keys)  # type: ignore[misc]

    async def publish_catalog(self, announcements: Sequence[ToolAnnouncement]) -> None:
        """Replace the deployment's catalogue (what it serves, whether or not a worker
        is up) in one transaction: a reader sees the old one or the new one, whole."""
        mapping: dict[str | bytes, str | bytes | int | float] = {
            registry_key(a): a.model_copy(update={"seen_at": 0.0}).model_dump_json()
            for a in announcements
        }
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.delete(keys.CATALOG)
                if mapping:
                    pipe.hset(keys.CATALOG, mapping=mapping)
                await pipe.execute()

    async def catalog(self) -> dict[str, ToolAnnouncement]:
        """The published catalogue alone."""
        return await self._announcements(keys.CATALOG)

    async def announced(self) -> dict[str, ToolAnnouncement]:
        """What workers announced alone (stale announcements included)."""
        return await self._announcements(keys.REGISTRY)

    async def registry(self) -> dict[str, ToolAnnouncement]:
        """What submit resolves against: the catalogue, extended and refreshed by the
        workers' announcements. A catalogue entry never goes stale (it is stamped now);
        a live announcement of the same tool replaces it."""
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(keys.CATALOG)
                pipe.hgetall(keys.REGISTRY)
                catalogued, announced = await pipe.execute()
        now = time.time()
        merged = {
            text(k): ToolAnnouncement.model_validate_json(v).model_copy(update={"seen_at": now})
            for k, v in catalogued.items()
        }
        for k, v in announced.items():
            ann = ToolAnnouncement.model_validate_json(v)
            key = text(k)
            if key not in merged or now - ann.seen_at <= ANNOUNCEMENT_TTL_S:
                merged[key] = ann
        return merged

    async def _announcements(self, key: str) -> dict[str, ToolAnnouncement]:
        with redis_errors_mapped():
            raw = await resolved(self.redis.hgetall(key))
        return {text(k): ToolAnnouncement.model_validate_json(v) for k, v in raw.items()}
