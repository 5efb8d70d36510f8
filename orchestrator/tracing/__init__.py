"""One OpenTelemetry trace per run, flat enough for a person to read.

The shape, after the GenAI and messaging semantic conventions:

    invoke_agent {agent}          the run; recorded by whichever process ends it
    ├─ send model                 the submitting process enqueues step 0
    ├─ process model  ──link──►   that send span
    │  ├─ chat {model}
    │  └─ send tools              the step's tool calls (and the next step)
    ├─ process tools  ──link──►   its send span
    │  ├─ execute_tool {name}
    │  └─ send model
    └─ …

Every `process {queue}` span is a direct child of the run and *linked* to the
`send` span that enqueued its job, so a 20-step run is 20 x a few rows at depth
≤ 3, not a staircase 120 levels deep.

Every span also names its OpenInference kind (AGENT, LLM, TOOL, or CHAIN for the
plumbing), which LLM trace viewers file spans by: agentq's tracer adds it as each
span starts (`kinds.py`).

A run outlives any process, so its span ids derive from the run id: every
process knows the root without carrying it, and the process that ends the run
records the root (with the submit time as its start) from the run's meta.
Recording a span with preset ids needs the SDK's id generator; agentq wraps
the generator of its own tracer only, so an application's provider (and its
other tracers) are left alone.

Sending is recorded after the fact too: a transition may or may not enqueue the
jobs its arguments carry (a duplicate delivery, a stale step). `Hops` starts a
`send` span per job, stamps its context into the job's envelope, and ends only
the spans of jobs the transition enqueued; the others are never ended, so never
exported.

Whether anything is recorded depends only on whether a tracer provider is set
(agentq's, installed from the standard OTEL_* variables, or the
application's). With none, every function here returns at once.

Spans are the OpenTelemetry SDK's own: on the provider agentq installs from the
OTEL_* variables (`provider`: the SDK's `TracerProvider`, `BatchSpanProcessor` and
OTLP exporters) or on the application's, with whatever the application gave it.
What a span costs still matters (a step records six): agentq's tracer is made once
per provider, the current span is read and set through the API's context variable
directly (when the runtime context is the default one), and attributes are computed
only when a span records. `bench/tracing_bench.py` measures it against no provider.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.trace import (
    INVALID_SPAN,
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.trace.propagation import _SPAN_KEY

from agentq.orchestrator.core.keys import queue_name
from agentq.orchestrator.core.queued_job import QueuedJob
from agentq.orchestrator.core.run_ids import ParentLink, call_span_id, run_trace_id
from agentq.orchestrator.tracing import genai_content
from agentq.orchestrator.tracing.kinds import KindedTracer
from agentq.orchestrator.tracing.kinds import KindedTracerProvider as KindedTracerProvider

# The provider's life, from here too: every process that traces calls these.
from agentq.orchestrator.tracing.provider import flush_tracing as flush_tracing
from agentq.orchestrator.tracing.provider import setup_tracing as setup_tracing
from agentq.orchestrator.tracing.provider import shutdown_tracing as shutdown_tracing

if TYPE_CHECKING:
    from agentq.orchestrator.core.envelopes import JobEnvelope

log = logging.getLogger("agentq.tracing")


class TransitionArgs(Protocol):
    """A transition's typed input (CreateRun, CommitStep, RecordResult, ...): the jobs it
    may enqueue are what `Hops.stamp` stamps."""

    def carried_jobs(self) -> Iterable[QueuedJob]: ...


Input = TypeVar("Input", bound=TransitionArgs)

SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
# In a run's meta carrier: the traceparent of the request that submitted the run.
SUBMITTED_BY = "submitted_by"
MESSAGING_SYSTEM = "redis"

_PRESET: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "agentq_preset_ids", default=None
)
# What a log line of the current job names (run id, job id, queue).
JOB_LOG_CONTEXT: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "agentq_job_log_context", default=None
)
# (provider, agentq's tracer on it or None if that provider records nothing)
_tracer: tuple[object, trace.Tracer | None] | None = None
# While no provider is set, `trace.get_tracer_provider()` looks the variable naming one
# to load up in os.environ on every call (a KeyError raised and caught inside os.environ:
# ~1 us, a dozen times a run). Whether the variable is set is read once, here; the API's
# global is read on every call, so a provider set later is still found.
_PROVIDER_FROM_ENV = OTEL_PYTHON_TRACER_PROVIDER in os.environ
_UNREADABLE = object()
# The variable behind the current OpenTelemetry context, when it is the API's default
# (contextvars) runtime context: every job reads and sets it a few times, directly.
_RUNTIME = getattr(otel_context, "_RUNTIME_CONTEXT", None)
_CONTEXT: contextvars.ContextVar[Context] | None = (
    _RUNTIME._current_context if type(_RUNTIME) is ContextVarsRuntimeContext else None
)


def _agentq_version() -> str:
    try:
        return version("agentq")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


_VERSION = _agentq_version()


# -- agentq's tracer on the current provider ------------------------------------


def recording() -> bool:
    """Whether spans record: some tracer provider (agentq's or the application's) is set."""
    return _bound() is not None


class _PresetIds:
    """The SDK's id generator, but ids preset in `_PRESET` win (for the run's span)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def generate_span_id(self) -> int:
        preset = _PRESET.get()
        return preset[1] if preset else int(self._inner.generate_span_id())

    def generate_trace_id(self) -> int:
        preset = _PRESET.get()
        return preset[0] if preset else int(self._inner.generate_trace_id())

    def is_trace_id_random(self) -> bool:
        return bool(getattr(self._inner, "is_trace_id_random", lambda: True)())


def _bound() -> trace.Tracer | None:
    """agentq's tracer on the current provider, or None when no provider records. Made
    once per provider: every job asks, several times."""
    global _tracer
    if getattr(trace, "_TRACER_PROVIDER", _UNREADABLE) is None and not _PROVIDER_FROM_ENV:
        return None  # none set, none to load: what the API's proxy provider records
    provider = trace.get_tracer_provider()
    bound = _tracer
    if bound is not None and bound[0] is provider:
        return bound[1]
    made: trace.Tracer | None = None
    if not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        made = _make_tracer(provider)
    _tracer = (provider, made)
    return made


def _current_span() -> Span:
    """The current span: the API's `get_current_span()`, read from its variable."""
    if _CONTEXT is None:
        return trace.get_current_span()
    current: Span | None = _CONTEXT.get().get(_SPAN_KEY)  # type: ignore[assignment]
    return INVALID_SPAN if current is None else current


def _make_tracer(provider: trace.TracerProvider) -> trace.Tracer:
    made = provider.get_tracer("agentq", _VERSION, schema_url=SCHEMA_URL)
    inner = getattr(made, "id_generator", None)
    if inner is not None and not isinstance(inner, _PresetIds):
        made.id_generator = _PresetIds(inner)  # type: ignore[attr-defined]
    # Every span agentq starts carries its OpenInference kind (kinds.py): one place.
    return KindedTracer(made)


def tracer() -> trace.Tracer:
    """agentq's tracer on the current provider, able to record spans with preset ids."""
    return _bound() or trace.NoOpTracer()


# -- the run's span ---------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def run_ids(run_id: str) -> tuple[int, int]:
    """The run's trace id and root span id, derived from its id: every process agrees."""
    digest = hashlib.sha256(run_id.encode()).digest()
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return run_trace_id(run_id), span_id  # a sub-agent's child run is in its parent's trace


@functools.lru_cache(maxsize=4096)
def run_span_context(run_id: str) -> SpanContext:
    trace_id, span_id = run_ids(run_id)
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))


@functools.lru_cache(maxsize=4096)
def run_context(run_id: str) -> otel_context.Context:
    return trace.set_span_in_context(NonRecordingSpan(run_span_context(run_id)))


def carrier_context(carrier: Mapping[str, str]) -> otel_context.Context | None:
    """The context a W3C carrier names (a caller's `traceparent`), or None if invalid."""
    links = _link(carrier)
    if not links:
        return None
    return trace.set_span_in_context(NonRecordingSpan(links[0].context))


def current_carrier() -> dict[str, str]:
    """The current span as W3C headers, or nothing when there is no valid span."""
    context = trace.get_current_span().get_span_context()
    return {"traceparent": _traceparent(context)} if context.is_valid else {}


def run_carrier(run_id: str) -> dict[str, str]:
    """The run's span as W3C headers (kept in the run's meta for anyone to look up).
    Pure: a function of the run id alone, whether or not anything records."""
    trace_id, span_id = run_ids(run_id)
    return {"traceparent": _traceparent_of(trace_id, span_id, 1)}


def trace_id_of(traceparent: str | None) -> int | None:
    """The trace id a W3C `traceparent` names, or None when it is not a valid one."""
    links = _link({"traceparent": traceparent or ""})
    return links[0].context.trace_id if links else None


def run_carrier_submitted(run_id: str, submitted_by: str | None) -> dict[str, str]:
    """The run's carrier as its meta keeps it: the run's span, and the span of the
    request that submitted it (`submitted_by`, a W3C traceparent) when one came."""
    carrier = run_carrier(run_id)
    if submitted_by and _link({"traceparent": submitted_by}):
        carrier[SUBMITTED_BY] = submitted_by
    return carrier


def record_run(run_id: str, meta: Mapping[str, str]) -> None:
    spec = json.loads(meta.get("spec", "{}"))
    attributes = genai_content.run_attributes(run_id, spec, meta)
    name = f"invoke_agent {attributes['gen_ai.agent.name']}"
    parent, links = _run_parent(run_id, meta)
    token = _PRESET.set(run_ids(run_id))
    try:
        root = tracer().start_span(
            name,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
            start_time=int(float(meta.get("created_at", time.time())) * 1e9),
        )
    finally:
        _PRESET.reset(token)
    if meta.get("status") == "failed":
        error = json.loads(meta.get("error", "{}"))
        error_type = str(error.get("type") or "error")
        message = str(error.get("message") or "")
        root.set_attribute("error.type", error_type)
        root.add_event("exception", {"exception.type": error_type, "exception.message": message})
        root.set_status(Status(StatusCode.ERROR, message))
    root.end()


def _run_parent(
    run_id: str, meta: Mapping[str, str]
) -> tuple[otel_context.Context, tuple[Link, ...]]:
    """A child run's span is a child of its parent's call span. A top run's is a child of
    the request that submitted it when the run is in that request's trace (its id was
    minted there: `traced_run_id`), else a root linked to that request."""
    if "parent" in meta:
        return _parent_call_context(run_id, meta), ()
    carrier = json.loads(meta.get("trace") or "{}")
    submitted = _link({"traceparent": str(carrier.get(SUBMITTED_BY, ""))})
    if submitted and submitted[0].context.trace_id == run_ids(run_id)[0]:
        context = trace.set_span_in_context(NonRecordingSpan(submitted[0].context))
        return context, ()
    return otel_context.Context(), submitted


def _parent_call_context(run_id: str, meta: Mapping[str, str]) -> otel_context.Context:
    """A child run's span is a child of its parent's call span."""
    link = ParentLink.model_validate_json(meta["parent"])
    call = SpanContext(
        run_ids(run_id)[0],
        call_span_id(link.run_id, link.call_id),
        is_remote=True,
        trace_flags=TraceFlags(1),
    )
    return trace.set_span_in_context(NonRecordingSpan(call), otel_context.Context())


def record_parked_call(
    run_id: str, call_id: str, tool_name: str, started_at: float, error: str | None
) -> None:
    """The `execute_tool` span of a call no job executed (a sub-agent's: its child run
    did the work), recorded when its answer is posted, under the run's span."""
    if not recording():
        return
    token = _PRESET.set((run_ids(run_id)[0], call_span_id(run_id, call_id)))
    try:
        current = tracer().start_span(
            f"execute_tool {tool_name}",
            context=run_context(run_id),
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool_name,
                "gen_ai.tool.call.id": call_id,
            },
            start_time=int(started_at * 1e9),
        )
    finally:
        _PRESET.reset(token)
    if error is not None:
        current.set_attribute("error.type", "tool_error")
        current.set_status(Status(StatusCode.ERROR, error[:500]))
    current.end()


# -- spans of one job ----------------------------------------------------------------


def _traceparent_of(trace_id: int, span_id: int, flags: int) -> str:
    # What the W3C propagator writes, without its machinery (this runs for every job).
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def _traceparent(context: SpanContext) -> str:
    return _traceparent_of(context.trace_id, context.span_id, context.trace_flags)


def _link(carrier: Mapping[str, str]) -> tuple[Link, ...]:
    """A link to the send span whose W3C `traceparent` the job's envelope carries."""
    traceparent = carrier.get("traceparent", "")
    # "00-" 32 hex "-" 16 hex "-" 2 hex, as _traceparent_of writes it
    if len(traceparent) != 55 or not traceparent[2] == traceparent[35] == traceparent[52] == "-":
        return ()
    try:
        trace_id, span_id = int(traceparent[3:35], 16), int(traceparent[36:52], 16)
    except ValueError:
        return ()
    if not (trace_id and span_id):
        return ()
    return (Link(SpanContext(trace_id, span_id, is_remote=True, trace_flags=_SAMPLED)),)


_SAMPLED = TraceFlags(1)


class _Current:
    """Makes a span current for a `with` block, then ends it; an exception that escapes
    is recorded on it first (as the API's `use_span` does). A class, not a generator:
    it runs for every job, twice. With no span (nothing records) it does nothing."""

    __slots__ = ("_exceptions", "_log_token", "_span", "_token")

    def __init__(
        self,
        current: Span | None,
        log_token: contextvars.Token[Mapping[str, Any] | None] | None = None,
        record_exceptions: bool = True,
    ) -> None:
        self._span = current
        self._log_token = log_token
        self._exceptions = record_exceptions
        self._token: object = None

    def __enter__(self) -> Span:
        current = self._span
        if current is None:
            return INVALID_SPAN
        if _CONTEXT is None:
            self._token = otel_context.attach(trace.set_span_in_context(current))
        else:  # what attach(set_span_in_context(...)) does, without its calls
            self._token = _CONTEXT.set(Context({**_CONTEXT.get(), _SPAN_KEY: current}))
        return current

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        current = self._span
        try:
            if current is not None:
                _detach(self._token)
                if isinstance(exc, Exception) and current.is_recording():
                    if self._exceptions:
                        current.record_exception(exc)
                    current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                current.end()
        finally:
            if self._log_token is not None:
                JOB_LOG_CONTEXT.reset(self._log_token)


def _detach(token: Any) -> None:
    if _CONTEXT is None:
        otel_context.detach(token)
        return
    try:
        _CONTEXT.reset(token)
    except ValueError:  # another context's token: the API logs it too, and goes on
        log.exception("could not restore the OpenTelemetry context")


def process_span(
    envelope: JobEnvelope,
    queue: str,
    job_id: str,
    parent: otel_context.Context | None = None,
) -> _Current:
    """The consumer span of one job: a child of the run (or of `parent`, a call's trace),
    linked to the job's send span. Also names the job for log lines written meanwhile."""
    log_token = JOB_LOG_CONTEXT.set(
        {"run_id": envelope.run_id, "job_id": job_id, "queue": queue, "step": envelope.step}
    )
    made = _bound()
    if made is None:
        return _Current(None, log_token)
    name = f"process {queue}"
    # The time the job waited in its queue is the gap after its send span.
    attributes: dict[str, Any] = {
        **_queue_attributes("process", queue),
        "messaging.message.id": job_id,
        "agentq.step": envelope.step,
    }
    current = made.start_span(
        name,
        context=parent if parent is not None else run_context(envelope.run_id),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=_link(envelope.trace),
    )
    return _Current(current, log_token)


@functools.lru_cache(maxsize=256)
def _queue_attributes(operation: str, queue: str) -> Mapping[str, str]:
    """The attributes every `{operation} {queue}` span has: built once per queue (a
    worker serves a few), copied into each span's own dict."""
    return {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.name": operation,
        "messaging.operation.type": operation,
        "messaging.destination.name": queue,
    }


def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Callable[[], dict[str, Any]] | None = None,
) -> _Current:
    """A child of the current span (a job's `chat` or `execute_tool`). Its attributes
    are computed only if it records, into a dict the span then keeps."""
    made = _bound()
    if made is None:
        # The hot path of every job: with no provider, skip the API's no-op machinery.
        return _Current(None)
    computed = attributes() if attributes else {}
    current = made.start_span(name, kind=kind, attributes=computed, record_exception=False)
    return _Current(current, record_exceptions=False)


def annotate(current: Span, attributes: Callable[[], Mapping[str, Any]]) -> None:
    """Add attributes to a span, computed only if it records."""
    if current.is_recording():
        computed = attributes()
        if computed:
            current.set_attributes(computed)


def record_exception(exc: BaseException, error_type: str | None = None) -> None:
    """Mark the current span failed by `exc`: status, `error.type`, an exception event."""
    current = trace.get_current_span()
    if not current.is_recording():
        return
    current.record_exception(exc)
    current.set_attribute("error.type", error_type or type(exc).__qualname__)
    current.set_status(Status(StatusCode.ERROR, str(exc)[:500]))


def mark_error(current: Span, error_type: str, message: str) -> None:
    """Mark `current` failed without an exception (a tool error result), keeping any
    `error.type` an exception already set."""
    if not current.is_recording():
        return
    attributes = getattr(current, "attributes", None) or {}
    if "error.type" not in attributes:
        current.set_attribute("error.type", error_type)
    current.set_status(Status(StatusCode.ERROR, message[:500]))


# -- queue hops ------------------------------------------------------------------------

_EMPTY_TRACE = '"trace":{}'


@functools.lru_cache(maxsize=256)
def _queue_of(queue_key: str) -> str:
    """`queue_name`, remembered: a worker sends to a few queues' keys."""
    return queue_name(queue_key)


class Hops:
    """The `send` spans of the jobs one transition may enqueue, keyed by job id.

    `stamp(args)` starts a span per job a transition's input carries (any field holding
    a `QueuedJob` or a list of them) and writes its context into the job's envelope;
    `sent(job_ids)` ends the spans of the jobs the transition did enqueue (its reply's
    outcome says which: `transitions.enqueued_job_ids`). Without a provider both do
    nothing.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._spans: dict[str, Span] = {}

    def stamp(self, args: Input) -> Input:
        """`args` with every job it carries stamped: in place (a transition's input is
        built for the one transition that stamps it; copying it was a tenth of tracing's
        cost per step), returned for chaining."""
        made = _bound()
        if made is None:
            return args
        # Under the job's span that sends (a chat, a tool call), else under the run: never
        # under an application's span around `submit`, which is another trace.
        in_run = _current_span().get_span_context().trace_id == run_ids(self.run_id)[0]
        context = None if in_run else run_context(self.run_id)

        def start(name: str, attributes: dict[str, Any]) -> Span:
            return made.start_span(
                name, context=context, kind=SpanKind.PRODUCER, attributes=attributes
            )

        for job in args.carried_jobs():
            self._stamp(start, job)
        return args

    def _stamp(self, start: Callable[[str, dict[str, Any]], Span], job: QueuedJob) -> None:
        """Start the job's send span and write its context into the job's envelope. In
        place, as the transition's input is: a job is built for the transition that
        enqueues it (copying each was a tenth of a send span's cost)."""
        queue = _queue_of(job.queue_key)
        send = start(
            f"send {queue}",
            {**_queue_attributes("send", queue), "messaging.message.id": job.job_id},
        )
        self._spans[job.job_id] = send
        traceparent = _traceparent(send.get_span_context())
        payload = job.payload
        if _EMPTY_TRACE in payload:  # the envelope as the builders render it: no re-parse
            payload = payload.replace(
                _EMPTY_TRACE, '"trace":{"traceparent":"' + traceparent + '"}', 1
            )
        else:  # stamped before (a transition tried again): the newest send span's
            body = json.loads(payload)
            body["a"][0]["trace"] = {"traceparent": traceparent}
            payload = json.dumps(body, separators=(",", ":"))
        job.__dict__["payload"] = payload  # no validation to run: the payload is ours

    def sent(self, job_ids: Iterable[str]) -> None:
        for job_id in job_ids:
            send = self._spans.pop(job_id, None)
            if send is not None:
                send.end()
        # The rest were not enqueued: never ended, never exported.
        self._spans.clear()
