"""The client API: submit runs, follow them, and answer what they wait for.

async with Client("redis://localhost:6379") as client:
    run_id = await client.submit(spec)
    async for event in client.events(run_id, follow=True):
        ...
    result = await client.wait(run_id)
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from opentelemetry.trace import SpanKind
from redis.asyncio import Redis

from agentq.orchestrator import listings, tracing
from agentq.orchestrator.endpoints import Endpoint, EndpointPolicy
from agentq.orchestrator.envelopes import MODEL_QUEUE
from agentq.orchestrator.errors import (
    RunConflictError,
    RunNotFoundError,
    RunStateError,
    RunTimeoutError,
)
from agentq.orchestrator.events import Event, event_json
from agentq.orchestrator.listings import RunSummary, WorkerRecord
from agentq.orchestrator.loop import CallPlan, error_result, status_after_approval
from agentq.orchestrator.messages import ToolResultPart
from agentq.orchestrator.providers import provider_table
from agentq.orchestrator.redis_conn import connect
from agentq.orchestrator.result import TERMINAL_STATUSES, RunResult, assemble
from agentq.orchestrator.settings import Settings
from agentq.orchestrator.spec import RunSpec
from agentq.orchestrator.state import (
    CallStatus,
    InputStatus,
    MetaField,
    Outcome,
    PostResult,
    Reply,
    ResolveApproval,
)
from agentq.orchestrator.store import RunStore
from agentq.orchestrator.tool_output import bounded_result
from agentq.orchestrator.tool_resolution import (
    ToolAnnouncement,
    ToolDef,
    announced_providers,
    live_registry,
    resolve_tools,
)
from agentq.orchestrator.transitions import create_args, input_answer_args, result_args, tool_job


def _as_spec(spec: RunSpec | Mapping[str, Any] | str) -> RunSpec:
    if isinstance(spec, RunSpec):
        return spec
    if isinstance(spec, str):
        return RunSpec.model_validate_json(spec)
    return RunSpec.model_validate(spec)


class Client:
    def __init__(
        self,
        redis_url: str | None = None,
        *,
        redis: Redis | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.redis = redis if redis is not None else connect(redis_url or self.settings.redis_url)
        self._owns_redis = redis is None
        self.store = RunStore(self.redis, retention_s=self.settings.retention_s)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_redis:
            await self.redis.aclose()

    # -- runs ------------------------------------------------------------------

    async def submit(self, spec: RunSpec | Mapping[str, Any] | str) -> str:
        """Validate the spec, resolve its tools, and start the run. Returns its id.

        Raises pydantic's ValidationError for a malformed spec, SpecError for one
        that names tools no worker serves, or a model endpoint, URL or key variable
        the deployment does not offer, and RunConflictError when its id is taken by a
        run of another spec. Submitting the same spec with its id again is a no-op.
        """
        run_spec = _as_spec(spec)
        now = time.time()
        registry = await self.store.registry()
        run_spec, endpoint = await self._resolve_model(run_spec, registry, now)
        tools = [
            t
            if t.park_timeout_s is not None
            else t.model_copy(update={"park_timeout_s": self.settings.park_timeout_s})
            for t in resolve_tools(run_spec, registry, now, model_provider=endpoint.provider)
        ]
        run_id = run_spec.id or uuid.uuid4().hex
        run_trace = tracing.new_run_trace(run_id)
        with tracing.span(f"publish {MODEL_QUEUE}", parent=run_trace, kind=SpanKind.PRODUCER):
            hop = tracing.carrier()
        reply = await self.store.create(
            create_args(
                run_id,
                run_spec,
                tools,
                run_spec.initial_messages(),
                trace=hop,
                run_trace=run_trace,
            )
        )
        if reply.outcome == Outcome.CONFLICT:
            raise RunConflictError(
                f"run id {run_id!r} is taken by a run of another spec (resubmit the same "
                "spec, or choose another id)"
            )
        await listings.add_run(self.redis, run_id, time.time(), self.settings.retention_s)
        return run_id

    @functools.cached_property
    def endpoint_policy(self) -> EndpointPolicy:
        """The models file and allow-lists of this deployment (read at the first submit)."""
        return EndpointPolicy.from_settings(self.settings)

    async def _resolve_model(
        self, spec: RunSpec, registry: dict[str, ToolAnnouncement], now: float
    ) -> tuple[RunSpec, Endpoint]:
        """Where the spec's model goes, checked; the spec names its endpoint explicitly
        afterwards, so that workers resolve it the same way."""
        table = provider_table(announced_providers(live_registry(registry, now)))
        endpoint = self.endpoint_policy.resolve(spec.model, table)
        await self.endpoint_policy.check_addresses(endpoint)
        if endpoint.endpoint is not None and spec.model.endpoint is None:
            model = spec.model.model_copy(
                update={"endpoint": endpoint.endpoint, "provider": endpoint.provider.name}
            )
            spec = spec.model_copy(update={"model": model})
        return spec, endpoint

    async def result(self, run_id: str) -> RunResult:
        """The run as it stands now (finished or not)."""
        meta, messages, steps = await self.store.snapshot(run_id)
        return assemble(run_id, meta, messages, steps)

    async def runs(self, *, limit: int = 20, statuses: Sequence[str] = ()) -> list[RunSummary]:
        """Recent runs, newest first (runs kept for the retention period)."""
        return await listings.recent_runs(self.redis, limit=limit, statuses=statuses)

    async def workers(self) -> list[WorkerRecord]:
        """Workers that announced themselves recently."""
        return await listings.live_workers(self.redis)

    async def wait(self, run_id: str, timeout_s: float | None = None) -> RunResult:
        """Wait until the run succeeds, fails or is cancelled."""
        meta = await self.store.meta(run_id)
        if meta[MetaField.STATUS] not in TERMINAL_STATUSES:
            try:
                await asyncio.wait_for(
                    self._until_terminal(run_id, int(meta[MetaField.SEQ])), timeout_s
                )
            except TimeoutError:
                raise RunTimeoutError(
                    f"run {run_id!r} did not finish within {timeout_s:g} s"
                ) from None
        return await self.result(run_id)

    async def _until_terminal(self, run_id: str, after: int) -> None:
        async for _ in self.store.events(run_id, after, follow=True):
            pass

    def events(
        self, run_id: str, after: int | None = None, follow: bool = False
    ) -> AsyncIterator[Event]:
        """Events after seq `after`; with `follow`, until the run ends."""
        return self.store.events(run_id, after or 0, follow=follow)

    async def cancel(self, run_id: str, reason: str | None = None) -> str:
        """Cancel the run. Returns its status afterwards (a finished run stays finished)."""
        reply = await self.store.cancel(run_id, reason)
        if reply.outcome == Outcome.UNKNOWN_RUN or reply.status is None:
            raise RunNotFoundError(f"no run with id {run_id!r}")
        if reply.outcome == Outcome.CANCELLED:
            meta = await self.store.meta(run_id)
            tracing.end_run(json.loads(meta.get(MetaField.TRACE, "{}")), run_id, "cancelled")
        return str(reply.status)

    # -- parked calls ------------------------------------------------------------

    async def _parked(self, run_id: str, call_id: str) -> tuple[int, CallPlan, dict[str, str]]:
        meta = await self.store.meta(run_id)
        if meta[MetaField.STATUS] in TERMINAL_STATUSES:
            raise RunStateError(f"run {run_id!r} has ended ({meta[MetaField.STATUS]})")
        step = int(meta[MetaField.STEP])
        call_json, _ = await self.store.call_state(run_id, step, call_id)
        if call_json is None:
            raise RunStateError(f"run {run_id!r} has no call {call_id!r} in its current step")
        trace = json.loads(meta.get(MetaField.TRACE, "{}"))
        return step, CallPlan.model_validate_json(call_json), trace

    async def approve(
        self, run_id: str, call_id: str, approved: bool = True, reason: str | None = None
    ) -> None:
        """Approve a call parked for approval, or deny it (the model sees the reason)."""
        step, call, run_trace = await self._parked(run_id, call_id)
        tool_json = await self.store.tool_def(run_id, call.name)
        if tool_json is None:
            raise RunStateError(f"run {run_id!r} has no tool {call.name!r}")
        tool = ToolDef.model_validate_json(tool_json)
        hops = tracing.Hops(queue=call.queue or "tools", parent=run_trace)
        event = event_json(
            "tool-approval-response",
            run_id,
            step=step,
            tool_call_id=call_id,
            tool_name=call.name,
            approved=approved,
            reason=reason,
        )
        if approved:
            next_status = status_after_approval(tool)
            transition = ResolveApproval(
                run_id=run_id,
                step=step,
                call_id=call_id,
                approved=True,
                event=event,
                next_status=next_status,
                job=tool_job(run_id, step, call, hops(), run_trace)
                if next_status == CallStatus.QUEUED
                else None,
            )
        else:
            denial = f"The user denied the call to {call.name!r}" + (
                f": {reason}" if reason else "."
            )
            completion = result_args(
                run_id, step, error_result(call_id, call.name, denial), hops, run_trace
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
        reply = await self.store.resolve_approval(transition)
        self._check(reply, run_id, call_id, "awaiting approval")
        await self._after(reply.outcome, run_id, run_trace, hops)

    async def submit_tool_result(
        self, run_id: str, call_id: str, output: Any, is_error: bool = False
    ) -> None:
        """Post the result of a call that waits for one (a client tool)."""
        step, call, run_trace = await self._parked(run_id, call_id)
        result = (
            error_result(
                call_id,
                call.name,
                output if isinstance(output, str) else json.dumps(output, default=str),
            )
            if is_error
            else ToolResultPart(tool_call_id=call_id, tool_name=call.name, output=output)
        )
        tool_json = await self.store.tool_def(run_id, call.name)
        limit = ToolDef.model_validate_json(tool_json).max_output_bytes if tool_json else None
        result = bounded_result(result, limit or self.settings.max_tool_output_bytes)
        hops = tracing.Hops(queue=MODEL_QUEUE, parent=run_trace)
        reply = await self.store.post_result(
            result_args(run_id, step, result, hops, run_trace, completion=PostResult)
        )
        self._check(reply, run_id, call_id, "awaiting a result")
        await self._after(reply.outcome, run_id, run_trace, hops)

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

    @staticmethod
    async def _after(
        outcome: Outcome, run_id: str, run_trace: dict[str, str], hops: tracing.Hops
    ) -> None:
        if outcome in (Outcome.CONTINUED, Outcome.APPROVED):
            hops.record(hops.allocated)
        if outcome == Outcome.FINISHED:
            tracing.end_run(run_trace, run_id, "succeeded")
