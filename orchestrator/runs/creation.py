"""Creating a run: the checks a spec passes (webhooks, memory, model endpoints, tools,
step preparation) before the `create` transition stores it and enqueues its first step.
What `Runs.submit`, `Runs.create` and `Runs.fork` share.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import OutOfMemoryError, ResponseError

from agentq.orchestrator import tracing
from agentq.orchestrator.budgets.ledger import BudgetLedger
from agentq.orchestrator.concurrency.slots import Slot, is_placed, placed_id, slot_of
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import (
    AgentqError,
    BudgetReachedError,
    InfrastructureError,
    RunConflictError,
    SpecError,
    TenantLimitError,
)
from agentq.orchestrator.core.fairness import lane_of
from agentq.orchestrator.core.keys import WEBHOOK_RUNS
from agentq.orchestrator.core.run_ids import (
    DEFAULT_TENANT,
    placement,
    tenant_run_id,
    traced_run_id,
)
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.core.start_times import check_future
from agentq.orchestrator.core.tenant_limits import RETRY_AFTER_S, TenantLoad, limit_for
from agentq.orchestrator.loop.prepare import announced_hooks, checked_preparation
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.policy.endpoints import Endpoint, EndpointPolicy
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.policy.providers import provider_table
from agentq.orchestrator.policy.webhooks import check_webhooks
from agentq.orchestrator.runs.children import ChildOf
from agentq.orchestrator.runs.fork import ForkCopy
from agentq.orchestrator.runs.index import RunIndex
from agentq.orchestrator.runs.published_workflows import WorkflowCatalogue
from agentq.orchestrator.runs.state import CreateRun, Outcome, QueuedJob, Reply
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import create_args, enqueued_job_ids
from agentq.orchestrator.runs.turns import ThreadTurns, Turn
from agentq.orchestrator.spec.limits import check_limits
from agentq.orchestrator.spec.resolution import resolve_tools
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolAnnouncement, ToolDef
from agentq.orchestrator.tools.announcements import (
    announced_providers,
    check_endpoint_announced,
    live_registry,
)
from agentq.orchestrator.tools.workflow_catalogue import PublishedWorkflows


class RunCreation:
    """Creates runs for one Client's `Runs`."""

    def __init__(self, redis: Redis, settings: Settings, store: RunStore, index: RunIndex) -> None:
        self.redis = redis
        self.settings = settings
        self.store = store
        self.index = index
        self.workflows = WorkflowCatalogue(redis)
        self.budgets = BudgetLedger(redis, settings)
        self.turns: ThreadTurns | None = None
        self._admission = redis.register_script(scripts.script("agentq.orchestrator.runs", "admit"))

    async def admit(self) -> None:
        """Refuse a new run while Redis is over its maxmemory, before anything is
        created (a check of specs, `submit_many`'s before its first chunk). A script that
        declares it may write (a shebang without `allow-oom`) is refused up front by
        Redis 7 then. The create transition is such a script itself (`create.lua`), so a
        creation sends no admit call of its own."""
        try:
            with full_refused():
                await self._admission(keys=[], args=[])
        except ResponseError:
            return  # a Redis without script flags (< 7): the transitions judge alone

    async def create(
        self,
        run_spec: RunSpec,
        tenant: str | None,
        child_of: ChildOf | None = None,
        *,
        fork: ForkCopy | None = None,
        end_job: QueuedJob | None = None,
        traceparent: str | None = None,
        run_id: str | None = None,
        start_at: float | None = None,
        batch_line: bool = False,
        batch: str | None = None,
        batch_weight: int = 1,
    ) -> tuple[str, bool]:
        """Check, resolve and create the run; its id and whether it is new. The spec's
        `id` is the tenant's choice, in its namespace; `run_id`, an id already derived
        (a child's, a batch line's). A run without either, submitted with a
        `traceparent`, gets one in that trace. `start_at` (seconds since the epoch): a
        delayed run, checked like the spec before anything is written."""
        request = CreateRequest(
            spec=run_spec,
            tenant=tenant,
            child_of=child_of,
            fork=fork,
            end_job=end_job,
            traceparent=traceparent,
            run_id=run_id,
            start_at=start_at,
            batch_line=batch_line,
            batch=batch,
            batch_weight=batch_weight,
        )
        (created,) = await self.create_many([request])
        if isinstance(created, AgentqError):
            raise created
        return created

    async def create_many(
        self, requests: Sequence[CreateRequest]
    ) -> list[tuple[str, bool] | AgentqError]:
        """`create` for many runs, each request's outcome in order: its (id, is new), or
        the error that refused it (a bad spec, a conflict, a tenant's cap or budget, a
        busy thread). The deployment is read once, each tenant's budget once, and the
        creations go in one round trip (one per node of a cluster); an
        InfrastructureError is raised."""
        now = time.time()
        # No admit call: the creations are refused whole by a full Redis (`full_refused`).
        deployment = await self._deployment(admit=False)
        budgets: dict[str, AgentqError | None] = {}
        # None: the outcome of a run prepared, known once the creations are back.
        outcomes: list[tuple[str, bool] | AgentqError | None] = []
        prepared: list[_Creating] = []
        for request in requests:
            try:
                check_pure(request.spec, self.settings)
                checked = await self._checked(request, now, deployment)
                if request.enforce:
                    await self._budget_allows(request.tenant or DEFAULT_TENANT, budgets)
                prepared.append(await self._prepared(request, checked, now))
            except InfrastructureError:
                await self._give_back(prepared)
                raise
            except AgentqError as exc:  # this request's own: a bad spec, a busy thread
                outcomes.append(exc)
                continue
            except ValidationError as exc:  # a spec that resolves to none valid
                outcomes.append(SpecError(f"invalid spec: {exc.errors()[0].get('msg', exc)}"))
                continue
            except BaseException:
                await self._give_back(prepared)
                raise
            outcomes.append(None)
        created = iter(await self._create_all(prepared))
        return [next(created) if o is None else o for o in outcomes]

    async def check_many(self, specs: Sequence[RunSpec]) -> None:
        """Every spec checked as `create` checks it, the deployment read once; the first
        bad one raises its SpecError, its message led by its index ("spec 3: ...")."""
        now = time.time()
        for i, spec in enumerate(specs):
            with indexed(i):
                check_pure(spec, self.settings)
        deployment = await self._deployment()
        for i, spec in enumerate(specs):
            with indexed(i):
                await self._checked(CreateRequest(spec=spec), now, deployment)

    async def _budget_allows(self, tenant: str, seen: dict[str, AgentqError | None]) -> None:
        """`check_budget`, asked once per tenant of a call (`seen`: its answers so far)."""
        if tenant not in seen:
            try:
                await self.check_budget(tenant)
                seen[tenant] = None
            except BudgetReachedError as exc:
                seen[tenant] = exc
        refusal = seen[tenant]
        if refusal is not None:
            raise refusal

    async def _prepared(self, request: CreateRequest, checked: _Checked, now: float) -> _Creating:
        """What the create transition of a checked request takes: its id, the thread's
        turn it runs on, its input. Written ahead of it: the webhook index, the turn."""
        run_spec, tools = checked
        tenant, child_of, end_job = request.tenant, request.child_of, request.end_job
        enforce = request.enforce
        run_id = request.run_id
        if run_id is None:
            run_id = (
                tenant_run_id(tenant, run_spec.id)
                if run_spec.id
                else _new_run_id(request.traceparent)
            )
        slot = None
        if run_spec.concurrency is not None:
            run_id, slot = _placed(run_id, request.run_id is None, tenant, run_spec)
        if run_spec.webhooks:
            # Listed first: a worker takes the run up once it exists (at least once).
            await self.redis.zadd(WEBHOOK_RUNS, {run_id: now}, nx=True)
        # As given: what a queued run on a thread is created from.
        turn = await self._take_turn(request.spec, tenant, run_id)
        if turn is not None and end_job is None:
            end_job = turn.end_job
        try:
            hops = tracing.Hops(run_id)
            # A thread's run starts from the thread's history; its spec keeps only its own.
            history = list(turn.history) if turn is not None else []
            args = create_args(
                run_id,
                run_spec,
                tools,
                [*history, *run_spec.initial_messages()],
                child_of,
                request.traceparent,
                start_at_ms=checked_start_ms(request.start_at, now),
                tenant=tenant or DEFAULT_TENANT,
            )
            args = hops.stamp(request.fork.applied(args) if request.fork is not None else args)
            lane = lane_of(
                tenant,
                run_spec.fairness,
                run_spec.priority,
                self.settings.priority_aging_s,
                self.settings.tenant_weights,
                request.batch,
                request.batch_weight,
            )
            update: dict[str, object] = {"lane": lane, "slot": slot}
            if end_job is not None:
                update["end_job"] = end_job
            if request.batch is not None:
                update["batch"] = request.batch
            if turn is not None and turn.queued:
                # Visible at once (status, events, cancel), it starts when its turn comes.
                update["hold"] = True
            if turn is not None and turn.replacing:
                enforce = False
            load = await self._tenant_load(
                tenant or DEFAULT_TENANT, run_id, enforce=enforce, batch_line=request.batch_line
            )
            if load is not None:
                update["tenant_load"] = load
            args = args.model_copy(update=update)
        except BaseException:
            if turn is not None:
                await self.turns_of().give_back(turn)
            raise
        return _Creating(request.spec, run_id, tenant, args, turn, hops)

    async def _create_all(self, runs: list[_Creating]) -> list[tuple[str, bool] | AgentqError]:
        """Apply the create transitions of prepared runs in one round trip (per node), then
        list the new ones; each run's (id, is new) or the error its reply means."""
        try:
            with full_refused():  # the create's shebang: Redis 7 refuses it whole
                replies = await self.store.create_many([run.args for run in runs])
        except BaseException:
            await self._give_back(runs)
            raise
        outcomes: list[tuple[str, bool] | AgentqError] = []
        listed: list[tuple[str, str | None, float | None]] = []
        queued: list[_Creating] = []
        for run, reply in zip(runs, replies, strict=True):
            if not run.args.hold:
                run.hops.sent(enqueued_job_ids(run.args, reply.outcome))
            if run.turn is not None and reply.outcome != Outcome.CREATED:
                await self.turns_of().give_back(run.turn)
            if reply.outcome in (Outcome.CREATED, Outcome.EXISTS):
                # Scored by the run's own `created_at`: a list's time range is the one it shows.
                # A repeated submission lists it too (NX: a listed run keeps its place): its
                # first submitter may have died between the create and the index.
                listed.append((run.run_id, run.tenant, run.args.at))
                if run.turn is not None and run.turn.queued:
                    queued.append(run)
            outcomes.append(_refusal(run, reply) or (run.run_id, reply.outcome == Outcome.CREATED))
        await self.index.add_many(listed)
        for run in queued:
            assert run.turn is not None
            await self.turns_of().queued(run.submitted, run.tenant, run.turn)
        return outcomes

    async def _give_back(self, runs: list[_Creating]) -> None:
        for run in runs:
            if run.turn is not None:
                await self.turns_of().give_back(run.turn)

    async def check_budget(self, tenant: str) -> None:
        """Refuse a submit of a tenant whose shared budget is reached (BudgetReachedError);
        a run created under an id already derived (a batch's line, a child, …) is held at
        its step instead (orchestrator/budgets/)."""
        reached = await self.budgets.reached(tenant, None)
        if reached is not None:
            raise BudgetReachedError(
                reached.message(), budget=reached.scope.id, limit=reached.limit
            )

    async def _tenant_load(
        self, tenant: str, run_id: str, *, enforce: bool, batch_line: bool
    ) -> TenantLoad | None:
        """What the create counts the run under, for a limited tenant: with the counts
        of the partitions other than the run's (the transition reads its own) and the
        tenant's batch lines in flight (the batch admission counts them)."""
        limit = limit_for(self.settings.tenant_limits, tenant)
        if limit is None:
            return None
        others: list[tuple[int, int]] = []
        if keys.partition_count() > 1:
            own = keys.partition_of(run_id)
            others = [n for p, n in (await self.store.tenant_load(tenant)).items() if p != own]
        return TenantLoad(
            tenant=tenant,
            max_in_flight=limit.max_in_flight,
            max_queued=limit.max_queued,
            others_in_flight=sum(in_flight for in_flight, _ in others)
            + await self.store.batch_lines_in_flight(tenant),
            others_queued=sum(queued for _, queued in others),
            enforce=enforce,
            batch_line=batch_line,
        )

    def turns_of(self) -> ThreadTurns:
        if self.turns is None:
            raise SpecError("a run on a thread ('thread_id') is submitted through a Client")
        return self.turns

    async def _take_turn(self, spec: RunSpec, tenant: str | None, run_id: str) -> Turn | None:
        if spec.thread_id is None:
            return None
        return await self.turns_of().take(spec, tenant, run_id)

    async def checked(self, run_spec: RunSpec, now: float) -> tuple[RunSpec, list[ToolDef]]:
        """The spec checked against the deployment and its workers as a submit checks it
        (webhooks, limits, model endpoints, tools, step preparation), and resolved: the
        spec as it is stored, and its tools."""
        check_pure(run_spec, self.settings)
        return await self._checked(CreateRequest(spec=run_spec), now, await self._deployment())

    async def _deployment(self, *, admit: bool = True) -> _Deployment:
        """What a spec is checked against, read once for every spec of a submit: Redis
        has room for new runs (`admit`: asked, unless the creations that follow ask
        it themselves), the workers' announcements, the published workflows."""
        if admit:
            await self.admit()
        return _Deployment(await self.store.registry(), await self.workflows.read())

    async def _checked(
        self, request: CreateRequest, now: float, deployment: _Deployment
    ) -> _Checked:
        """The request's spec resolved against the deployment (its model endpoint, its
        tools, its step preparation) and its start time judged."""
        checked_start_ms(request.start_at, now)
        run_spec, registry, workflows = request.spec, deployment.registry, deployment.workflows
        run_spec, endpoint = await self._resolve_model(run_spec, registry, now)
        tools = [
            t
            if t.park_timeout_s is not None
            else t.model_copy(update={"park_timeout_s": self.settings.park_timeout_s})
            for t in resolve_tools(
                run_spec,
                registry,
                now,
                model_provider=endpoint.provider,
                settings=self.settings,
                workflows=workflows,
            )
        ]
        run_spec = await checked_preparation(
            run_spec,
            tools,
            hooks=announced_hooks(live_registry(registry, now)),
            resolve=lambda ref: self._resolve_ref(ref, registry, now),
        )
        if run_spec.guardrails is not None and run_spec.guardrails.tool_output:
            guards = run_spec.guardrails.tool_output
            tools = [t.model_copy(update={"output_guards": guards}) for t in tools]
        return run_spec, tools

    @functools.cached_property
    def endpoint_policy(self) -> EndpointPolicy:
        """The models file and allow-lists of this deployment (read at the first submit)."""
        return EndpointPolicy.from_settings(self.settings)

    async def _resolve_model(
        self, spec: RunSpec, registry: dict[str, ToolAnnouncement], now: float
    ) -> tuple[RunSpec, Endpoint]:
        """Where the spec's model goes, checked; the spec names its endpoint explicitly
        afterwards, so that workers resolve it the same way."""
        live = live_registry(registry, now)
        endpoint = self.endpoint_policy.resolve(
            spec.model, provider_table(announced_providers(live))
        )
        check_endpoint_announced(endpoint.endpoint, live)
        await self.endpoint_policy.check_addresses(endpoint)
        if endpoint.endpoint is not None and spec.model.endpoint is None:
            model = spec.model.model_copy(
                update={"endpoint": endpoint.endpoint, "provider": endpoint.provider.name}
            )
            spec = spec.model_copy(update={"model": model})
        return spec, endpoint

    async def _resolve_ref(
        self, ref: ModelRef, registry: dict[str, ToolAnnouncement], now: float
    ) -> ModelRef:
        """Another model of the spec (a step rule's, the summary model), checked as the
        main model is."""
        live = live_registry(registry, now)
        endpoint = self.endpoint_policy.resolve(ref, provider_table(announced_providers(live)))
        check_endpoint_announced(endpoint.endpoint, live)
        await self.endpoint_policy.check_addresses(endpoint)
        if endpoint.endpoint is not None and ref.endpoint is None:
            return ref.model_copy(
                update={"endpoint": endpoint.endpoint, "provider": endpoint.provider.name}
            )
        return ref


def chosen_run_id(spec: RunSpec, tenant: str | None) -> str | None:
    """The id of the run the spec's `id` names for `tenant` (in the tenant's namespace,
    placed by its concurrency key), or None when the spec chooses none."""
    if spec.id is None:
        return None
    run_id = tenant_run_id(tenant, spec.id)
    if spec.concurrency is None:
        return run_id
    return placed_id(run_id, tenant, spec.concurrency.resolved(spec.metadata))


def derived_placement(spec: RunSpec, tenant: str | None) -> str:
    """What an id derived for a run elsewhere (a batch's line, a schedule's tick) starts
    with, so that the run lands beside its concurrency key's counter: the key's placement,
    or "" for a spec without a key. Pure: a re-delivered admission or tick derives the
    same id and finds its run. A `key_from` that finds no key places nothing: the create
    refuses that spec with the key's own error."""
    if spec.concurrency is None:
        return ""
    try:
        return placement(tenant, spec.concurrency.resolved(spec.metadata))
    except SpecError:
        return ""


def _placed(run_id: str, ours: bool, tenant: str | None, spec: RunSpec) -> tuple[str, Slot]:
    """The run's id placed beside its concurrency key's counter, and its slot. An id this
    creation chose is placed here; a batch line's and a schedule tick's are derived placed
    (`derived_placement`). A sub-agent's child keeps the id derived from its parent's
    call, which the parent's side finds it by, so only a deployment of one partition can
    count its key."""
    assert spec.concurrency is not None
    key = spec.concurrency.resolved(spec.metadata)
    if ours:
        run_id = placed_id(run_id, tenant, key)
    elif not is_placed(run_id, tenant, key) and keys.partition_count() > 1:
        raise SpecError(
            "concurrency: a sub-agent's child run keeps the id derived from its parent's "
            "call, so its key is counted only on a deployment of one partition "
            "(AGENTQ_PARTITIONS=1)"
        )
    return run_id, slot_of(run_id, tenant, key, spec.concurrency.max)


@dataclass(frozen=True)
class CreateRequest:
    """One run to create (`Runs.create`'s arguments, `Runs.create_many`'s items)."""

    spec: RunSpec
    tenant: str | None = None
    child_of: ChildOf | None = None
    fork: ForkCopy | None = None
    end_job: QueuedJob | None = None
    traceparent: str | None = None
    run_id: str | None = None
    start_at: float | None = None  # seconds since the epoch: a delayed run
    batch_line: bool = False  # a batch's line, in flight in its admission's count
    batch: str | None = None  # its batch's id: its steps count to the batch's budget
    batch_weight: int = 1  # its batch's priority: the weight of the batch's fairness key

    @property
    def enforce(self) -> bool:
        """A run the tenant submits may be refused at its caps and its budget; a run
        under an id already derived (a batch's line, a child, a thread's queued run, a
        schedule's tick) is counted, never refused (core/tenant_limits.py)."""
        return self.run_id is None and self.child_of is None and self.end_job is None


class _Deployment(NamedTuple):
    registry: dict[str, ToolAnnouncement]
    workflows: PublishedWorkflows


# A checked spec: as it is stored, and its tools.
_Checked = tuple[RunSpec, list[ToolDef]]


@dataclass
class _Creating:
    """A checked run on its way to its create transition."""

    submitted: RunSpec  # as given: what a queued run on a thread is created from
    run_id: str
    tenant: str | None
    args: CreateRun
    turn: Turn | None
    hops: tracing.Hops


def check_pure(run_spec: RunSpec, settings: Settings) -> None:
    """What a spec is judged on without Redis: its webhooks, limits and concurrency key."""
    check_webhooks(run_spec.webhooks, settings)
    check_limits(run_spec.limits, settings)
    if run_spec.concurrency is not None:
        run_spec.concurrency.resolved(run_spec.metadata)  # a key_from that finds no key


def checked_start_ms(start_at: float | None, now: float) -> int | None:
    return None if start_at is None else int(check_future(start_at, now) * 1000)


@contextlib.contextmanager
def full_refused() -> Iterator[None]:
    """Redis's refusal of a script that may write while it is over its maxmemory (OOM:
    Redis 7 refuses a script under a shebang without `allow-oom` whole, before it runs),
    raised as what it means for a new run."""
    try:
        yield
    except (OutOfMemoryError, InfrastructureError) as exc:
        cause = exc.__cause__ if isinstance(exc, InfrastructureError) else exc
        if not isinstance(cause, OutOfMemoryError):
            raise
        raise InfrastructureError(
            "Redis is out of memory (maxmemory reached): new runs are refused until "
            "memory is freed",
            retryable=True,
        ) from cause


@contextlib.contextmanager
def indexed(i: int) -> Iterator[None]:
    """A SpecError of the i-th spec of many says which one it is."""
    try:
        yield
    except SpecError as exc:
        exc.message = f"spec {i}: {exc.message}"
        exc.args = (exc.message, *exc.args[1:])
        raise


def _refusal(run: _Creating, reply: Reply) -> AgentqError | None:
    """The error a create transition's reply means, if it refused the run."""
    tenant = run.tenant or DEFAULT_TENANT
    if reply.outcome == Outcome.OVER_LIMIT:
        return TenantLimitError(
            f"tenant {tenant!r} is at its {reply.limit} of {reply.cap} "
            f"runs (AGENTQ_TENANT_LIMITS): try again in {RETRY_AFTER_S} s",
            limit=reply.limit or "",
            retry_after_s=RETRY_AFTER_S,
        )
    if reply.outcome == Outcome.CONFLICT:
        return RunConflictError(
            f"run id {run.run_id!r} is taken by a run of another spec (resubmit the same "
            "spec, or choose another id)"
        )
    return None


def _new_run_id(traceparent: str | None) -> str:
    trace_id = tracing.trace_id_of(traceparent)
    return uuid.uuid4().hex if trace_id is None else traced_run_id(trace_id)
