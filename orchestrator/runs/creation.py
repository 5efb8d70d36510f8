"""Creating a run: the checks a spec passes (webhooks, memory, model endpoints, tools,
step preparation) before the `create` transition stores it and enqueues its first step.
What `Runs.submit`, `Runs.create` and `Runs.fork` share.
"""

from __future__ import annotations

import functools
import time
import uuid

from redis.asyncio import Redis
from redis.exceptions import OutOfMemoryError, ResponseError

from agentq.orchestrator import tracing
from agentq.orchestrator.budgets.ledger import BudgetLedger
from agentq.orchestrator.concurrency.slots import Slot, is_placed, placed_id, slot_of
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import (
    BudgetReachedError,
    InfrastructureError,
    RunConflictError,
    SpecError,
    TenantLimitError,
)
from agentq.orchestrator.core.fairness import check_spec_fairness, lane_of
from agentq.orchestrator.core.keys import WEBHOOK_RUNS
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT, tenant_run_id, traced_run_id
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
from agentq.orchestrator.runs.state import Outcome, QueuedJob
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
        """Refuse a new run while Redis is over its maxmemory. A script that declares it
        may write (a shebang without `allow-oom`) is refused up front by Redis 7 then;
        the create transition itself would be let through (its first write is a DEL)."""
        try:
            await self._admission(keys=[], args=[])
        except OutOfMemoryError as exc:
            raise InfrastructureError(
                "Redis is out of memory (maxmemory reached): new runs are refused until "
                "memory is freed",
                retryable=True,
            ) from exc
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
    ) -> tuple[str, bool]:
        """Check, resolve and create the run; its id and whether it is new. The spec's
        `id` is the tenant's choice, in its namespace; `run_id`, an id already derived
        (a child's, a batch line's). A run without either, submitted with a
        `traceparent`, gets one in that trace. `start_at` (seconds since the epoch): a
        delayed run, checked like the spec before anything is written."""
        submitted = run_spec  # as given: what a queued run on a thread is created from
        # A run the tenant submits may be refused at its caps; a run under an id already
        # derived (a batch's line, a child, a thread's queued run, a schedule's tick) is
        # counted, never refused (core/tenant_limits.py).
        enforce = run_id is None and child_of is None and end_job is None
        now = time.time()
        start_at_ms = None if start_at is None else int(check_future(start_at, now) * 1000)
        run_spec, tools = await self.checked(run_spec, now)
        if enforce:
            await self.check_budget(tenant or DEFAULT_TENANT)
        given = run_id
        if run_id is None:
            run_id = tenant_run_id(tenant, run_spec.id) if run_spec.id else _new_run_id(traceparent)
        slot = None
        if run_spec.concurrency is not None:
            run_id, slot = _placed(run_id, given is None, tenant, run_spec)
        if run_spec.webhooks:
            # Listed first: a worker takes the run up once it exists (at least once).
            await self.redis.zadd(WEBHOOK_RUNS, {run_id: now}, nx=True)
        turn = await self._take_turn(submitted, tenant, run_id)
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
                traceparent,
                start_at_ms=start_at_ms,
                tenant=tenant or DEFAULT_TENANT,
            )
            args = hops.stamp(fork.applied(args) if fork is not None else args)
            lane = lane_of(
                tenant, run_spec.fairness, run_spec.priority, self.settings.priority_aging_s
            )
            args = args.model_copy(update={"lane": lane, "slot": slot})
            if end_job is not None:
                args = args.model_copy(update={"end_job": end_job})
            if batch is not None:
                args = args.model_copy(update={"batch": batch})
            if turn is not None and turn.queued:
                # Visible at once (status, events, cancel), it starts when its turn comes.
                args = args.model_copy(update={"hold": True})
            if turn is not None and turn.replacing:
                enforce = False
            load = await self._tenant_load(
                tenant or DEFAULT_TENANT, run_id, enforce=enforce, batch_line=batch_line
            )
            if load is not None:
                args = args.model_copy(update={"tenant_load": load})
            reply = await self.store.create(args)
        except BaseException:
            if turn is not None:
                await self.turns_of().give_back(turn)
            raise
        if not args.hold:
            hops.sent(enqueued_job_ids(args, reply.outcome))
        if turn is not None and reply.outcome != Outcome.CREATED:
            await self.turns_of().give_back(turn)
        if reply.outcome == Outcome.OVER_LIMIT:
            raise TenantLimitError(
                f"tenant {tenant or DEFAULT_TENANT!r} is at its {reply.limit} of {reply.cap} "
                f"runs (AGENTQ_TENANT_LIMITS): try again in {RETRY_AFTER_S} s",
                limit=reply.limit or "",
                retry_after_s=RETRY_AFTER_S,
            )
        if reply.outcome == Outcome.CONFLICT:
            raise RunConflictError(
                f"run id {run_id!r} is taken by a run of another spec (resubmit the same "
                "spec, or choose another id)"
            )
        if reply.outcome == Outcome.CREATED:
            # Scored by the run's own `created_at`: a list's time range is the one it shows.
            await self.index.add(run_id, tenant, args.at)
            if turn is not None and turn.queued:
                await self.turns_of().queued(submitted, tenant, turn)
        return run_id, reply.outcome == Outcome.CREATED

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
        check_webhooks(run_spec.webhooks, self.settings)
        check_limits(run_spec.limits, self.settings)
        check_spec_fairness(run_spec.fairness, self.settings.spec_fairness)
        if run_spec.concurrency is not None:
            run_spec.concurrency.resolved(run_spec.metadata)  # a key_from that finds no key
        await self.admit()
        registry = await self.store.registry()
        workflows = await self.workflows.read()
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


def _placed(run_id: str, ours: bool, tenant: str | None, spec: RunSpec) -> tuple[str, Slot]:
    """The run's id placed beside its concurrency key's counter, and its slot. An id this
    creation chose is placed; an id derived elsewhere (a batch's line, a sub-agent, a
    schedule's tick) is kept, which only a deployment of one partition can count."""
    assert spec.concurrency is not None
    key = spec.concurrency.resolved(spec.metadata)
    if ours:
        run_id = placed_id(run_id, tenant, key)
    elif not is_placed(run_id, tenant, key) and keys.partition_count() > 1:
        raise SpecError(
            "concurrency: a batch's line, a sub-agent or a schedule's tick keeps its derived "
            "id, so its key is counted only on a deployment of one partition "
            "(AGENTQ_PARTITIONS=1)"
        )
    return run_id, slot_of(run_id, tenant, key, spec.concurrency.max)


def _new_run_id(traceparent: str | None) -> str:
    trace_id = tracing.trace_id_of(traceparent)
    return uuid.uuid4().hex if trace_id is None else traced_run_id(trace_id)
