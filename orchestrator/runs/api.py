"""Runs through `Client`: submit, read, list, follow, and answer what a run waits for.

    run_id = await client.runs.submit(spec)
    async for event in client.runs.events(run_id, follow=True):
        ...
    result = await client.runs.wait(run_id)

Every method raises agentq's own errors only (a Redis failure is an
InfrastructureError). `wait` and `events(follow=True)` ride out a Redis restart:
they reconnect within their timeout and resume after the last event they saw.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from redis.asyncio import Redis

from agentq.orchestrator import tracing
from agentq.orchestrator.concurrency.load import ConcurrencyKeys
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import (
    AgentqError,
    InfrastructureError,
    RunNotFoundError,
    RunStateError,
    RunTimeoutError,
    SpecError,
    StartTimeError,
    ToolInputError,
)
from agentq.orchestrator.core.events import Event, event_json
from agentq.orchestrator.core.fairness import Priority, checked_priority
from agentq.orchestrator.core.messages import MESSAGE_ADAPTER, Message, ToolResultPart, Usage
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.tool_errors import ToolErrorKind
from agentq.orchestrator.core.tool_output import bounded_result
from agentq.orchestrator.loop.plan import (
    CallPlan,
    error_result,
    status_after_approval,
    validate_input,
)
from agentq.orchestrator.loop.replay import ReplayReport, replay
from agentq.orchestrator.output.typed import parsed_output, typed_output
from agentq.orchestrator.redis.faults import (
    Backoff,
    infrastructure_error,
    is_transient,
    maps_redis_errors,
    redis_errors_mapped,
    refuses_writes,
)
from agentq.orchestrator.runs.children import ChildOf
from agentq.orchestrator.runs.creation import CreateRequest, RunCreation, chosen_run_id, indexed
from agentq.orchestrator.runs.ended import RunEndListener, run_ended
from agentq.orchestrator.runs.fork import fork_copy, merge_patch, patched_spec
from agentq.orchestrator.runs.index import (
    Cursor,
    RunFilter,
    RunIndex,
    RunPage,
    RunSummary,
)
from agentq.orchestrator.runs.listing import list_runs
from agentq.orchestrator.runs.result import TERMINAL_STATUSES, RunResult, assemble
from agentq.orchestrator.runs.result_guards import guarded_result
from agentq.orchestrator.runs.state import (
    CallStatus,
    InputStatus,
    MetaField,
    Outcome,
    PostResult,
    QueuedJob,
    Reply,
    ResolveApproval,
    RunStatus,
    StartQueued,
    TransitionInput,
)
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.tenant_usage import tenant_usage
from agentq.orchestrator.runs.transitions import (
    enqueued_job_ids,
    input_answer_args,
    result_args,
    start_job,
    tool_job,
)
from agentq.orchestrator.runs.turns import ThreadTurns
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef
from agentq.orchestrator.tools.base import STORED_SPEC

T = TypeVar("T")

# A tenant's submissions are counted in fixed one-minute windows (the HTTP API's limit).
SUBMIT_WINDOW_S = 60
# Runs `submit_many` creates per round trip: past a few hundred the round trip is a
# small share of a run's cost, and a chunk's pipeline is held in memory whole.
SUBMIT_CHUNK = 500
# How long a wait blocks on a run's end notice before it reads the run's status again.
_WAIT_BLOCK_MS = 5000
# How often a wait reads the status of a run instead, while a full Redis refuses the notice.
_FULL_POLL_S = 1.0
# What a RunHead is read from (not the whole meta: its spec is the bulk of it).
_HEAD_FIELDS = (MetaField.TENANT, MetaField.STATUS, MetaField.STEP, MetaField.BUDGET_HELD)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class _Reconnect:
    """Retries through a Redis outage until a budget of outage time is spent."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.backoff = Backoff(first_s=0.1, max_s=1.0)
        self.since: float | None = None
        self.reached = False  # whether Redis ever answered

    async def failed(self, exc: BaseException) -> None:
        if isinstance(exc, InfrastructureError) and exc.__cause__ is not None:
            exc = exc.__cause__  # one of ours, mapped from Redis's: judge the original
        if isinstance(exc, AgentqError):
            raise exc
        if not is_transient(exc):
            raise infrastructure_error(exc) from exc
        now = time.monotonic()
        self.since = self.since or now
        if now - self.since > self.budget_s:
            raise infrastructure_error(exc) from exc
        await asyncio.sleep(self.backoff.next_delay())

    def succeeded(self) -> None:
        self.since = None
        self.backoff.reset()


def _epoch_s(when: datetime | float | None) -> float | None:
    """A start time as seconds since the epoch; a datetime must say its zone."""
    if when is None or not isinstance(when, datetime):
        return when
    if when.tzinfo is None:
        raise StartTimeError(
            f"start_at {when.isoformat()} has no time zone: give an aware datetime"
        )
    return when.timestamp()


def _tenant_of(spec: RunSpec, tenant: str | None) -> str | None:
    """The tenant a submitted run is listed under: the caller's, else the spec's
    `metadata.tenant`."""
    named = spec.metadata.get("tenant")
    return named if tenant is None and isinstance(named, str) else tenant


def _as_spec(spec: RunSpec | Mapping[str, Any] | str) -> RunSpec:
    if isinstance(spec, RunSpec):
        return spec
    if isinstance(spec, str):
        return RunSpec.model_validate_json(spec)
    return RunSpec.model_validate(spec)


class RunHead(BaseModel):
    """Where a run stands now, without its history: what a door shows or resumes from."""

    id: str
    tenant: str
    status: str
    step: int  # the current step's index
    seq: int  # the last event's sequence number: following from here skips the past
    # The shared budget whose limit holds its step (`batch:<tenant>:<id>`, `tenant:<tenant>`;
    # orchestrator/budgets/): it goes on when that budget is raised.
    held: str | None = None


class SubmitWindow(BaseModel):
    """A tenant's submissions in the current one-minute window, this one counted."""

    count: int
    resets_in_s: float

    @property
    def retry_after_s(self) -> int:
        """Whole seconds until the window resets (what a refused submitter is told)."""
        return max(1, int(self.resets_in_s) + 1)


class Runs:
    """The run operations of one Client (`client.runs`)."""

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings
        self.store = RunStore(redis, retention_s=settings.retention_s)
        self.index = RunIndex(redis, retention_s=settings.retention_s)
        self._creation = RunCreation(redis, settings, self.store, self.index)
        self.concurrency = ConcurrencyKeys(redis)

    @property
    def turns(self) -> ThreadTurns | None:
        """The threads a run's `thread_id` names (`Client` hands its `Threads` here)."""
        return self._creation.turns

    @turns.setter
    def turns(self, turns: ThreadTurns | None) -> None:
        self._creation.turns = turns

    async def submit(
        self,
        spec: RunSpec | Mapping[str, Any] | str,
        *,
        tenant: str | None = None,
        priority: Priority | str | None = None,
        output_type: type[BaseModel] | None = None,
        start_at: datetime | float | None = None,
    ) -> str:
        """Validate the spec, resolve its tools, and start the run. Returns its id.

        `tenant`: whose run it is (default: the spec's `metadata.tenant`, else the
        default tenant); its jobs take turns with other tenants' (core/fairness.py).
        `priority` (`low`, `normal`, `high` or 0-9) overrides the spec's.

        `start_at`: a delayed run's start (an aware datetime, or seconds since the
        epoch): the run is created `scheduled` and its first step waits until then; a
        time in the past is a StartTimeError. `cancel` stops it before it starts.

        `output_type`: a pydantic model the run's structured output must be (its JSON
        Schema becomes the spec's `output.schema`; `wait(..., output_type=)` parses the
        output back into it).

        Raises pydantic's ValidationError for a malformed spec, SpecError for one
        that names tools no worker serves, or a model endpoint, URL or key variable
        the deployment does not offer, and RunConflictError when its id is taken by a
        run of another spec (of the same tenant: ids live in the tenant's namespace).
        Submitting the same spec with its id again is a no-op.
        """
        run_spec = _as_spec(spec)
        if output_type is not None:
            output = typed_output(run_spec.output, output_type)
            run_spec = run_spec.model_copy(update={"output": output})
        if priority is not None:
            run_spec = run_spec.model_copy(update={"priority": checked_priority(priority)})
        run_id, _ = await self.create(
            run_spec, tenant=_tenant_of(run_spec, tenant), start_at=start_at
        )
        return run_id

    async def submit_many(
        self,
        specs: Sequence[RunSpec | Mapping[str, Any] | str],
        *,
        tenant: str | None = None,
        chunk: int = SUBMIT_CHUNK,
    ) -> builtins.list[str]:
        """`submit` for many specs, cheaply: the run ids, in order.

        Every spec is parsed and checked before any run is created, the deployment read
        once: the first bad one raises (a SpecError, its message led by its index: "spec
        3: ..."; pydantic's ValidationError for a malformed one, likewise led) and
        nothing is created. Then the runs are created `chunk` at a time, each chunk's
        creations in one round trip. A refusal that only the creation can tell (a run id
        taken by another spec, a tenant's cap) raises once every chunk is sent: the runs
        before and after it are created. A spec's `metadata.tenant` lists it under that
        tenant when `tenant` is None, as `submit` does."""
        run_specs: builtins.list[RunSpec] = []
        for i, spec in enumerate(specs):
            try:
                run_specs.append(_as_spec(spec))
            except ValidationError as exc:
                raise SpecError(f"spec {i}: {exc}") from exc
        with redis_errors_mapped():
            await self._creation.check_many(run_specs)
        outcomes: builtins.list[tuple[str, bool] | AgentqError] = []
        for start in range(0, len(run_specs), max(1, chunk)):
            requests = [
                CreateRequest(spec=spec, tenant=_tenant_of(spec, tenant))
                for spec in run_specs[start : start + max(1, chunk)]
            ]
            outcomes += await self.create_many(requests)
        ids: builtins.list[str] = []
        for i, outcome in enumerate(outcomes):
            if isinstance(outcome, AgentqError):
                with indexed(i):
                    raise outcome
            ids.append(outcome[0])
        return ids

    async def create_many(
        self, requests: Sequence[CreateRequest]
    ) -> builtins.list[tuple[str, bool] | AgentqError]:
        """`create` for many runs (each request holds `create`'s arguments): each one's
        (run id, is new) or the AgentqError that refused it, in order; the deployment is
        read once and the creations sent in one round trip. Raises InfrastructureError
        only. What a batch's admission creates its lines' runs with."""
        with redis_errors_mapped():
            return await self._creation.create_many(requests)

    async def create(
        self,
        spec: RunSpec | Mapping[str, Any] | str,
        *,
        tenant: str | None = None,
        end_job: QueuedJob | None = None,
        child_of: ChildOf | None = None,
        traceparent: str | None = None,
        run_id: str | None = None,
        start_at: datetime | float | None = None,
        batch_line: bool = False,
        batch: str | None = None,
        batch_weight: int = 1,
    ) -> tuple[str, bool]:
        """`submit`, also saying whether the run is new (False: the id existed already).

        The run is listed under `tenant` (the default tenant when None); a spec's `id` is
        a name in that tenant's namespace (`core/run_ids.py: tenant_run_id`): the run's
        id is returned. `end_job` is enqueued by the run's end transition, however it
        ends, and `run_id` is its id, already derived (a batch's line). `child_of`: the
        run is a sub-agent's child (its id derives from the parent's call).
        `traceparent`: the span of the request that submits it (W3C), the parent of the
        run's span when the run has no id of its own (it gets one in that trace), else
        a link from it. `start_at`: as `submit`'s. `batch_line`: the run is a batch's
        line, in flight in its batch admission's count (core/tenant_limits.py). `batch`:
        its batch's id (a batch line's run or its sub-agents': their steps count to the
        batch's budget, and they wait under the batch's fairness key), `batch_weight` the
        batch's priority (that key's weight)."""
        run_spec = _as_spec(spec)
        if child_of is not None:
            link = child_of.parent
            run_id = link.child_id
            run_spec = run_spec.model_copy(update={"id": run_id})
        with redis_errors_mapped():
            return await self._creation.create(
                run_spec,
                tenant,
                child_of,
                end_job=end_job,
                traceparent=traceparent,
                run_id=run_id,
                start_at=_epoch_s(start_at),
                batch_line=batch_line,
                batch=batch,
                batch_weight=batch_weight,
            )

    def chosen_id(self, spec: RunSpec, tenant: str | None) -> str | None:
        """The id of the run `spec`'s own `id` names for `tenant` (None: it names none):
        what a door looks up before it submits."""
        return chosen_run_id(spec, tenant)

    async def start_queued(self, run_id: str, history: Sequence[Message]) -> bool:
        """Start a run queued on its thread from the thread's `history`; whether it started
        now (False: it had started already, or ended while it waited)."""
        args = StartQueued(run_id=run_id, history=[m.model_dump_json() for m in history])
        with redis_errors_mapped():
            reply = await self.store.start_queued(args)
        return reply.outcome == Outcome.STARTED

    async def check_budget(self, tenant: str) -> None:
        """BudgetReachedError when the tenant's shared budget is reached (its submits are
        refused until it is raised: orchestrator/budgets/)."""
        with redis_errors_mapped():
            await self._creation.check_budget(tenant)

    async def check(self, spec: RunSpec | Mapping[str, Any] | str) -> RunSpec:
        """The spec checked as `submit` checks it (a ValidationError, SpecError), nothing
        created: what a schedule stores to create each tick's run from."""
        run_spec = _as_spec(spec)
        with redis_errors_mapped():
            await self._creation.checked(run_spec, time.time())
        return run_spec

    async def fork(
        self,
        run_id: str,
        at_step: int,
        patch: Mapping[str, Any] | None = None,
        *,
        tenant: str | None = None,
    ) -> str:
        """A new run with the first `at_step` steps of `run_id` copied (history, model
        responses, tool results) and the rest live, its spec patched by `patch` (a JSON
        merge patch). Raises SpecError when the run has not reached that step or the
        patched spec names what the deployment does not offer. Returns the new run id,
        listed under `tenant` (default: the original's)."""
        with redis_errors_mapped():
            # As stored: the fork copies the steps its tool messages refer to.
            meta, messages, steps = await self.store.snapshot(run_id, resolved=False)
        copy = fork_copy(run_id, at_step, meta, messages, steps)
        spec = RunSpec.model_validate(patched_spec(meta[MetaField.SPEC], patch))
        with redis_errors_mapped():
            new_id, _ = await self._creation.create(spec, tenant or meta.get("tenant"), fork=copy)
        return new_id

    async def retry(self, run_id: str, *, tenant: str | None = None) -> str:
        """A new run with `run_id`'s spec, from the start: a fork at step 0 (it records its
        original the same way). Returns the new run id."""
        return await self.fork(run_id, 0, tenant=tenant)

    async def replay(self, run_id: str, patch: Mapping[str, Any] | None = None) -> ReplayReport:
        """Today's loop over the run's recorded responses and results (no provider, no
        tool called): every step where it would send something else or take another
        path. `patch` (a JSON merge patch on the spec) asks "what if the spec were...".
        """
        with redis_errors_mapped():
            meta, messages, steps = await self.store.snapshot(run_id)
            by_name = {
                ToolDef.model_validate_json(t).name: ToolDef.model_validate_json(t)
                for t in await self.store.tool_defs(run_id)
            }
        order = json.loads(meta.get(MetaField.TOOL_ORDER, "[]"))
        tools = [by_name[n] for n in order if n in by_name]
        spec = RunSpec.model_validate(
            merge_patch(json.loads(meta[MetaField.SPEC]), patch or {}), context=STORED_SPEC
        )
        return replay(run_id, spec, tools, meta, messages, steps)

    async def status(self, run_id: str) -> RunHead:
        """Where the run stands now. RunNotFoundError when there is no such run."""
        with redis_errors_mapped():
            meta, seq = await self.store.head(run_id, _HEAD_FIELDS)
        return RunHead(
            id=run_id,
            tenant=meta.get(MetaField.TENANT, DEFAULT_TENANT),
            status=meta[MetaField.STATUS],
            step=int(meta.get(MetaField.STEP, 0)),
            seq=seq,
            held=meta.get(MetaField.BUDGET_HELD),
        )

    async def tools(self, run_id: str) -> builtins.list[ToolDef]:
        """The tools the run resolved when it was submitted."""
        with redis_errors_mapped():
            return [ToolDef.model_validate_json(t) for t in await self.store.tool_defs(run_id)]

    async def count_submission(
        self, tenant: str, n: int = 1, *, counter: str = "submits"
    ) -> SubmitWindow:
        """Count `n` submissions of `tenant` on `counter` in the current window, shared by
        every replica through Redis; the door that limits submissions compares the count."""
        now = time.time()
        window = int(now // SUBMIT_WINDOW_S)
        key = f"aq:serve:{counter}:{tenant}:{window}"
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.incrby(key, n)
                pipe.expire(key, 2 * SUBMIT_WINDOW_S)
                count, _ = await pipe.execute()
        return SubmitWindow(count=int(count), resets_in_s=(window + 1) * SUBMIT_WINDOW_S - now)

    async def list(
        self,
        tenant: str | None = None,
        *,
        status: str | None = None,
        metadata: Mapping[str, str] | None = None,
        model: str | None = None,
        error_kind: str | None = None,
        search: str | None = None,
        tool: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        limit: int = 50,
        cursor: str | None = None,
        scan_limit: int = 2000,
    ) -> RunPage:
        """A tenant's runs, newest first, filtered (`RunFilter`: `model` and `search`
        match substrings, `search` of the id, custom id and metadata values, `tool` a tool
        the run called), created in (created_after, created_before]; `next_cursor`
        continues the list.

        Filters are applied to the index's pages as they are read, reading at most
        `scan_limit` runs per call (`listing.py`): a page may come back short, with a
        cursor, and says how many runs it read (`scanned`)."""
        wanted = RunFilter(
            status=status,
            metadata=dict(metadata or {}),
            model=model,
            error_kind=error_kind,
            search=search,
            tool=tool,
        )
        with redis_errors_mapped():
            return await list_runs(
                self.redis,
                self.index,
                tenant,
                wanted,
                after=Cursor.decode(cursor) if cursor else None,
                created_after=created_after,
                created_before=created_before,
                limit=limit,
                scan_limit=scan_limit,
            )

    async def usage(self, tenant: str | None = None) -> Usage:
        """Everything a tenant's runs used and cost, so far (the default tenant's by
        default): every recorded model step, its runs' sub-agents included."""
        with redis_errors_mapped():
            return await tenant_usage(self.store.redis, tenant or DEFAULT_TENANT)

    async def result(self, run_id: str) -> RunResult:
        """The run as it stands now (finished or not)."""
        with redis_errors_mapped():
            meta, messages, steps = await self.store.snapshot(run_id)
            tools = await self.store.tool_defs(run_id)
        agents = frozenset(
            t.name for t in map(ToolDef.model_validate_json, tools) if t.kind == "agent"
        )
        result = assemble(run_id, meta, messages, steps, agents)
        if result.concurrency is not None:
            live = result.status == RunStatus.RUNNING
            slot = await self.concurrency.of_run(run_id, result.concurrency, live=live)
            result = result.model_copy(update={"concurrency": slot})
        if not result.children:
            return result
        # A refused sub-agent call (depth, fan-out, a bad child spec) never made its run.
        started = await self.store.existing(result.children.values())
        children = {call: child for call, child in result.children.items() if child in started}
        return result.model_copy(update={"children": children})

    async def conversation(self, run_id: str) -> builtins.list[Message]:
        """Every message of the run as the model saw it, its initial ones included: what a
        conversation's next turn continues from (the chat endpoint's history)."""
        with redis_errors_mapped():
            _, messages, _ = await self.store.snapshot(run_id)
        return [MESSAGE_ADAPTER.validate_json(m) for m in messages]

    async def recent(
        self, *, limit: int = 20, statuses: Sequence[str] = (), tenant: str | None = None
    ) -> builtins.list[RunSummary]:
        """A tenant's recent runs (the default tenant's by default), newest first, in any
        of `statuses` (all when empty): `list` pages for a CLI's list."""
        found: builtins.list[RunSummary] = []
        cursor: str | None = None
        wanted = set(statuses)
        while len(found) < limit:
            page = await self.list(
                tenant,
                status=statuses[0] if len(statuses) == 1 else None,
                limit=limit,
                cursor=cursor,
            )
            found += [r for r in page.runs if not wanted or r.status in wanted]
            cursor = page.next_cursor
            if cursor is None:
                break
        return found[:limit]

    async def wait(
        self,
        run_id: str,
        timeout_s: float | None = None,
        *,
        output_type: type[BaseModel] | None = None,
    ) -> RunResult:
        """Wait until the run succeeds, fails or is cancelled.

        `output_type`: the result's `output` is parsed into this pydantic model.
        Reconnects through Redis outages; gives up with RunTimeoutError at
        `timeout_s`, or (without one) with InfrastructureError once Redis has been
        unreachable for `settings.redis_retry_s`."""
        reconnect = _Reconnect(self.settings.redis_retry_s)
        try:
            result = await asyncio.wait_for(self._wait(run_id, reconnect), timeout_s)
        except TimeoutError:
            why = "" if reconnect.reached else " (Redis did not answer)"
            raise RunTimeoutError(
                f"run {run_id!r} did not finish within {timeout_s:g} s{why}"
            ) from None
        if output_type is None:
            return result
        return result.model_copy(update={"output": parsed_output(output_type, result.output)})

    async def _wait(self, run_id: str, reconnect: _Reconnect) -> RunResult:
        # The run's status, then a blocking read of its end notice (a stream this wait
        # makes ready and the run's end writes to: RunStore.watch_end), not of every event
        # the run emits on the way (a full run woke a follower of its events ~6 times,
        # each a read of Redis). Each `_WAIT_BLOCK_MS` without it, it looks again. A full
        # Redis refuses the notice (a write): the wait then reads the status each second.
        while True:
            try:
                while True:
                    try:
                        status, noticed = await self.store.watch_end(run_id), True
                    except InfrastructureError as exc:
                        if not refuses_writes(exc):
                            raise
                        status, noticed = await self.store.status_of(run_id), False
                    reconnect.reached = True
                    if status in TERMINAL_STATUSES:
                        break
                    if not noticed:
                        await asyncio.sleep(_FULL_POLL_S)
                    elif await self.store.end_notice(run_id, _WAIT_BLOCK_MS) is not None:
                        break
                return await self._retrying(self.result, run_id)
            except Exception as exc:
                await reconnect.failed(exc)

    async def _retrying(self, op: Callable[[str], Awaitable[T]], run_id: str) -> T:
        reconnect = _Reconnect(self.settings.redis_retry_s)
        while True:
            try:
                return await op(run_id)
            except Exception as exc:
                await reconnect.failed(exc)

    def events(
        self, run_id: str, after: int | None = None, follow: bool = False
    ) -> AsyncIterator[Event]:
        """Events after seq `after`; with `follow`, until the run ends.

        Following reconnects through Redis outages (up to `settings.redis_retry_s` of
        outage at a time) and resumes after the last event it yielded: no event is
        yielded twice and none is skipped."""
        return self._events(run_id, after or 0, follow)

    async def _events(self, run_id: str, after: int, follow: bool) -> AsyncIterator[Event]:
        reconnect = _Reconnect(self.settings.redis_retry_s if follow else 0.0)
        last = after
        while True:
            try:
                async for event in self.store.events(run_id, last, follow=follow):
                    reconnect.succeeded()
                    last = event.seq
                    yield event
                return
            except Exception as exc:
                await reconnect.failed(exc)

    def on_end(self, listener: RunEndListener) -> None:
        """Tell `listener` of each run this client ends (a cancel, an answer that finished
        the run), with its meta: a process's metrics count them."""
        self.store.end_listeners.append(listener)

    async def event_pages(
        self, positions: Mapping[str, int], *, block_ms: int = 5000
    ) -> dict[str, builtins.list[Event]]:
        """The next events of many runs (run id -> seq read so far) in one blocking read,
        for a process that follows many runs on one connection. The runs must be of one
        `read_group`."""
        by_stream = {keys.events(run_id): run_id for run_id in positions}
        pages = await self.store.event_pages(
            {keys.events(run_id): seq for run_id, seq in positions.items()}, block_ms=block_ms
        )
        return {by_stream[stream]: page for stream, page in pages.items()}

    @staticmethod
    def read_group(run_id: str) -> int:
        """Runs of one group can be followed by one `event_pages` read (their partition:
        one hash slot on a cluster)."""
        return keys.partition_of(run_id)

    async def cancel(
        self, run_id: str, reason: str | None = None, *, at_step_end: bool = False
    ) -> str:
        """Cancel the run. Returns its status afterwards (a finished run stays finished).
        `at_step_end`: a running run is cancelled at its step's end instead (the model
        step or tool calls in flight finish and are recorded, no new step starts): it
        stays `running` until then."""
        with redis_errors_mapped():
            return await self._cancel(run_id, reason, at_step_end=at_step_end)

    async def _cancel(self, run_id: str, reason: str | None, *, at_step_end: bool = False) -> str:
        reply = await self.store.cancel(run_id, reason, at_step_end=at_step_end)
        if reply.outcome == Outcome.UNKNOWN_RUN or reply.status is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        if reply.outcome == Outcome.STOPPING:
            return str(reply.status)  # its children end with its step, which joins on them
        if reply.outcome == Outcome.CANCELLED:
            await run_ended(self.store, run_id)
        await self._cancel_children(run_id, reason)
        return str(reply.status)

    async def _cancel_children(self, run_id: str, reason: str | None) -> None:
        """Cancelling a run cancels the child runs its current step started (sub-agents),
        and theirs in turn. Earlier steps' children have ended: the step joined on them."""
        for child_id in await self.store.agent_children(run_id):
            with contextlib.suppress(RunNotFoundError):  # not started (yet): nothing to do
                await self._cancel(child_id, reason or f"its parent run {run_id} was cancelled")

    # -- parked calls ------------------------------------------------------------

    async def _parked(self, run_id: str, call_id: str) -> tuple[int, CallPlan]:
        meta = await self.store.meta(run_id)
        if meta[MetaField.STATUS] in TERMINAL_STATUSES:
            raise RunStateError(f"run {run_id!r} has ended ({meta[MetaField.STATUS]})")
        step = int(meta[MetaField.STEP])
        call_json, _ = await self.store.call_state(run_id, step, call_id)
        if call_json is None:
            raise RunStateError(f"run {run_id!r} has no call {call_id!r} in its current step")
        return step, CallPlan.model_validate_json(call_json)

    @maps_redis_errors
    async def approve(
        self,
        run_id: str,
        call_id: str,
        approved: bool = True,
        reason: str | None = None,
        *,
        input: Any = None,
    ) -> None:
        """Approve a call parked for approval, or deny it (the model sees the reason).
        `input`: an approval may replace the call's input (None: as the model gave it);
        the new input must be valid for the tool's schema (SpecError otherwise, and the
        call still waits), and the event records both."""
        step, call = await self._parked(run_id, call_id)
        tool_json = await self.store.tool_def(run_id, call.name)
        if tool_json is None:
            raise RunStateError(f"run {run_id!r} has no tool {call.name!r}")
        tool = ToolDef.model_validate_json(tool_json)
        edited = None
        if input is not None:
            edited = _edited(call, tool, input, approved)
        event = event_json(
            "tool-approval-response",
            run_id,
            step=step,
            tool_call_id=call_id,
            tool_name=call.name,
            approved=approved,
            reason=reason,
            **({"original_input": call.input, "input": input} if edited else {}),
        )
        if approved:
            next_status = status_after_approval(tool)
            transition = ResolveApproval(
                run_id=run_id,
                step=step,
                call_id=call_id,
                approved=True,
                event=event,
                call=edited.model_dump_json(exclude={"result"}) if edited else None,
                next_status=next_status,
                job=tool_job(run_id, step, call)
                if next_status == CallStatus.QUEUED
                else start_job(run_id, step, call)
                if call.start_queue is not None
                else None,
            )
        else:
            denial = f"The user denied the call to {call.name!r}" + (
                f": {reason}" if reason else "."
            )
            completion = result_args(
                run_id, step, error_result(call_id, call.name, denial, ToolErrorKind.DENIED)
            )
            transition = ResolveApproval(
                run_id=run_id,
                step=step,
                call_id=call_id,
                approved=False,
                event=event,
                result=completion.result,
                events=completion.events,
                next_job=completion.next_job,
            )
        hops = tracing.Hops(run_id)
        transition = hops.stamp(transition)
        reply = await self.store.resolve_approval(transition)
        self._check(reply, run_id, call_id, "awaiting approval")
        await self._after(reply.outcome, transition, hops)

    @maps_redis_errors
    async def submit_tool_result(
        self, run_id: str, call_id: str, output: Any, is_error: bool = False
    ) -> None:
        """Post the result of a call that waits for one (a client tool). The run's
        `tool_output` guardrails are asked first (runs/result_guards.py): a trip posts a
        `denied` tool error instead."""
        step, call = await self._parked(run_id, call_id)
        result = (
            error_result(
                call_id,
                call.name,
                output if isinstance(output, str) else json.dumps(output, default=str),
                ToolErrorKind.EXECUTION,
            )
            if is_error
            else ToolResultPart(tool_call_id=call_id, tool_name=call.name, output=output)
        )
        tool_json = await self.store.tool_def(run_id, call.name)
        tool = ToolDef.model_validate_json(tool_json) if tool_json else None
        # Guarded as a worker's tool result is, by the workers that announced the guards.
        result = await guarded_result(self.store, run_id, step, tool, result)
        limit = tool.max_output_bytes if tool else None
        result = bounded_result(result, limit or self.settings.max_tool_output_bytes)
        hops = tracing.Hops(run_id)
        args = hops.stamp(result_args(run_id, step, result, completion=PostResult))
        reply = await self.store.post_result(args)
        self._check(reply, run_id, call_id, "awaiting a result")
        await self._after(reply.outcome, args, hops)

    @maps_redis_errors
    async def answer(
        self, run_id: str, request_id: str, content: dict[str, Any] | None = None
    ) -> None:
        """Answer a call's input request (MCP elicitation): `content`, or None to decline."""
        meta = await self.store.meta(run_id)
        if meta[MetaField.STATUS] in TERMINAL_STATUSES:
            raise RunStateError(f"run {run_id!r} has ended ({meta[MetaField.STATUS]})")
        step = int(meta[MetaField.STEP])
        reply = await self.store.input_answer(
            input_answer_args(
                run_id,
                step,
                request_id=request_id,
                call_id=request_id.split(".")[0],
                outcome=InputStatus.DECLINED if content is None else InputStatus.ACCEPTED,
                content=content,
            ),
        )
        if reply.outcome == Outcome.WRONG_STATE:
            raise RunStateError(
                f"run {run_id!r} has no open input request {request_id!r} in its current step"
            )
        if reply.outcome != Outcome.ANSWERED:
            raise RunStateError(f"run {run_id!r} no longer waits for input ({reply.outcome})")

    @staticmethod
    def _check(reply: Reply, run_id: str, call_id: str, wanted: str) -> None:
        if reply.outcome == Outcome.WRONG_STATE:
            raise RunStateError(
                f"call {call_id!r} of run {run_id!r} is not {wanted} (it is {reply.call_status})"
            )
        if reply.outcome in (
            Outcome.CLOSED,
            Outcome.STALE,
            Outcome.UNKNOWN_RUN,
            Outcome.UNKNOWN_CALL,
        ):
            raise RunStateError(
                f"run {run_id!r} no longer waits for call {call_id!r} ({reply.outcome})"
            )

    async def _after(self, outcome: Outcome, args: TransitionInput, hops: tracing.Hops) -> None:
        hops.sent(enqueued_job_ids(args, outcome))
        if outcome in (Outcome.FINISHED, Outcome.FAILED):
            await run_ended(self.store, args.run_id)


def _edited(call: CallPlan, tool: ToolDef, value: Any, approved: bool) -> CallPlan:
    """The call with the approver's input, refused unless it is an approval's and valid
    for the tool's schema (the model's input was checked the same way)."""
    if not approved:
        raise SpecError("an edited input goes with an approval, not a denial")
    try:
        validate_input(tool, value)
    except ToolInputError as exc:
        raise SpecError(f"the edited input is refused: {exc.message}") from None
    return call.model_copy(update={"input": value})
