"""agentq's spans on the tracer provider agentq itself installed, made lean.

The SDK's span is built for any caller: it samples through a delegate chain,
validates and copies every attribute into a locked bounded mapping, and hands
its processors a fresh read-only copy when it ends. A step records six spans,
and with the SDK that work alone was a third of tracing's cost per step. On
the provider agentq installs from the OTEL_* variables (never an
application's: that one's spans are the SDK's, as the application set it up),
and only while that provider samples and limits as the SDK does by default
(`eligible`), agentq's tracer makes `LightSpan`s instead: a `ReadableSpan` that
is also the API's `Span`, filled in place, ended into the same span processors.

What it keeps of the SDK's behaviour: the default sampler's decision (a child
is sampled when its parent is; a root always), attribute values checked as the
SDK checks them (scalars and homogeneous sequences; anything else is dropped
with the SDK's warning), the SDK's exception events and status rules, the
processors' `on_start`/`on_end` calls. What it leaves out: span limits (agentq
caps its own content; `eligible` is false when a limit is configured) and the
copy at `end` (a `LightSpan` no longer changes once ended).

agentq's own spans skip even the API's generic entry: `LightTracer.own_span`
takes the parent's `SpanContext` (agentq knows it: the run's, or the span it
read from the current context) and an attribute dict agentq built for the span,
so there is no context lookup, attribute copy or check on the way. In situ a
worker's tracing calls run with cold caches, about three times slower than in
a loop: every lookup and object left out counts several times over.
"""

from __future__ import annotations

import os
import random
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from time import time_ns
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as trace_api
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util import types

_RANDOM = int(getattr(TraceFlags, "RANDOM_TRACE_ID", 0))  # W3C trace context level 2
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SAMPLED_RANDOM = TraceFlags(TraceFlags.SAMPLED | _RANDOM)  # a new trace's id is random
_UNSET = Status(StatusCode.UNSET)
_SCALARS = (str, bool, int, float)
# Processor hooks that do nothing (the base class's, the batch processor's start/ending).
_NO_OPS = frozenset(
    {
        SpanProcessor.on_start,
        SpanProcessor._on_ending,
        BatchSpanProcessor.on_start,
        BatchSpanProcessor._on_ending,
    }
)
# A tracer's view of its provider's processors (see LightTracer._hooks).
_Hooks = tuple[
    object,
    tuple[Callable[..., None], ...],
    tuple[Callable[[Any], None], ...],
    tuple[Callable[[Any], None], ...],
]
# Variables that make the SDK bound a span's attributes, events or links.
_LIMIT_PREFIXES = ("OTEL_SPAN_", "OTEL_ATTRIBUTE_", "OTEL_EVENT_", "OTEL_LINK_")


def eligible(provider: object) -> bool:
    """Whether lean spans behave as the SDK's would on `provider`: an SDK provider
    whose sampler is the default one and whose spans are not limited."""
    if not isinstance(provider, TracerProvider):
        return False
    default = ParentBased(ALWAYS_ON).get_description()  # type: ignore[no-untyped-call]
    if provider.sampler.get_description() != default:
        return False
    return not any(name.startswith(_LIMIT_PREFIXES) for name in os.environ)


def _clean(attributes: types.Attributes) -> dict[str, Any]:
    """Attribute values as the SDK keeps them. agentq's own are scalars or lists of
    strings: a type check each; anything else goes through the SDK's own checks."""
    if not attributes:
        return {}
    clean: dict[str, Any] = dict(attributes)
    for key, value in clean.items():
        kind = type(value)
        if kind in _SCALARS:
            continue
        if kind is list and all(type(item) is str for item in value):
            clean[key] = tuple(value)  # as the SDK keeps a sequence
            continue
        return dict(BoundedAttributes(attributes=clean, immutable=False))
    return clean


class LightSpan(ReadableSpan, trace_api.Span):
    """A recording span: the fields `ReadableSpan` reads, filled as the span goes."""

    # In slots: every span sets these, and a span then needs no instance dict (one
    # object fewer to make and for the garbage collector to walk, a few thousand a
    # second). ReadableSpan has no slots, so a span that sets anything else (an event,
    # a status) gets a dict then.
    __slots__ = (
        "_attributes",
        "_context",
        "_end_time",
        "_instrumentation_scope",
        "_kind",
        "_links",
        "_name",
        "_own_attributes",
        "_own_context",
        "_own_links",
        "_parent",
        "_resource",
        "_start_time",
        "_tracer",
    )

    # What most spans keep as they start: shared, replaced only when one changes.
    _events: Sequence[Event] = ()
    _status = _UNSET
    _instrumentation_info = None
    _record_exception = True
    _set_status_on_exception = True

    def __init__(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: dict[str, Any],
        links: tuple[Link, ...],
        start_time: int,
        tracer: LightTracer,
    ) -> None:
        # ReadableSpan's fields, set directly (its constructor makes a Resource per call
        # when given none and checks what agentq's tracer already knows); the rest are
        # the class's defaults above until the span changes them.
        self._name = name
        self._context = self._own_context = context
        self._parent = parent
        self._kind = kind
        self._attributes = self._own_attributes = attributes
        self._links = self._own_links = links
        self._start_time = start_time
        self._end_time: int | None = None
        self._resource = tracer.resource
        self._instrumentation_scope = tracer.scope
        self._tracer = tracer

    # ReadableSpan's reads, without its copies and checks: nothing here is bounded, and
    # events and links are tuples already (the exporter reads them for every span).
    @property
    def events(self) -> Sequence[Event]:
        return self._events

    @property
    def links(self) -> Sequence[Link]:
        return self._own_links

    @property
    def dropped_attributes(self) -> int:
        return 0

    @property
    def dropped_events(self) -> int:
        return 0

    @property
    def dropped_links(self) -> int:
        return 0

    def get_span_context(self) -> SpanContext:
        return self._own_context

    def is_recording(self) -> bool:
        return self._end_time is None

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        if self._end_time is None:
            self._own_attributes.update(_clean(attributes))

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        if self._end_time is None:
            self._own_attributes.update(_clean({key: value}))

    def add_event(
        self,
        name: str,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
    ) -> None:
        if self._end_time is None:
            event = Event(name, _clean(attributes), timestamp or time_ns())
            self._events = (*self._events, event)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if self._end_time is None and context.is_valid:
            self._links = self._own_links = (*self._own_links, Link(context, _clean(attributes)))

    def update_name(self, name: str) -> None:
        if self._end_time is None:
            self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        # The SDK's rules: OK is final, UNSET never overrides.
        if self._end_time is not None or self._status.status_code is StatusCode.OK:
            return
        if isinstance(status, StatusCode):
            status = Status(status, description)
        if status.status_code is not StatusCode.UNSET:
            self._status = status

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        # The SDK's exception event, attribute for attribute.
        module = type(exception).__module__
        qualname = type(exception).__qualname__
        recorded: dict[str, Any] = {
            "exception.type": f"{module}.{qualname}"
            if module and module != "builtins"
            else qualname,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        if attributes:
            recorded.update(attributes)
        self.add_event("exception", recorded, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._end_time is not None:
            return
        self._end_time = end_time if end_time is not None else time_ns()
        self._tracer.ended(self)

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        # `with span:` (the API's): an exception that escapes marks the span, then it ends.
        if isinstance(exc_val, Exception) and self._end_time is None:
            if self._record_exception:
                self.record_exception(exc_val, escaped=True)
            if self._set_status_on_exception:
                self.set_status(Status(StatusCode.ERROR, f"{type(exc_val).__name__}: {exc_val}"))
        self.end()


class LightTracer(trace_api.Tracer):
    """agentq's tracer on agentq's own provider: `LightSpan`s into its processors.

    `ids`, when given, returns preset (trace id, span id) for the next span (the run's
    span, whose ids derive from the run id), or None for random ones."""

    def __init__(
        self,
        provider: TracerProvider,
        scope: InstrumentationScope,
        ids: Callable[[], tuple[int, int] | None] = lambda: None,
    ) -> None:
        self.resource = provider.resource
        self.scope = scope
        # What the SDK's spans call: the provider's processors, kept current (a processor
        # added later is called too), without the calls that do nothing.
        self._processor = provider._active_span_processor
        self._hooked: _Hooks = (None, (), (), ())
        self._ids = ids
        self._random = random.getrandbits

    def _hooks(self) -> _Hooks:
        """(processors, on_start, _on_ending, on_end hooks), swapped whole: a span ended
        on another thread meanwhile sees the old hooks or the new, never half."""
        hooked = self._hooked
        processors = getattr(self._processor, "_span_processors", None)
        if processors is hooked[0] and processors is not None:
            return hooked
        if processors is None:  # not the SDK's multi-processor: call it as the SDK would
            one = self._processor
            hooked = (None, (one.on_start,), (one._on_ending,), (one.on_end,))
        else:
            kinds = [(p, type(p)) for p in processors]
            hooked = (
                processors,
                tuple(p.on_start for p, k in kinds if k.on_start not in _NO_OPS),
                tuple(p._on_ending for p, k in kinds if k._on_ending not in _NO_OPS),
                tuple(p.on_end for p, k in kinds),
            )
        self._hooked = hooked
        return hooked

    def start_span(
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace_api.Span:
        span = self._started(
            name,
            trace_api.get_current_span(context).get_span_context(),
            kind,
            _clean(attributes),
            tuple(link for link in links if link.context.is_valid) if links else (),
            start_time,
            self._ids(),
            context,
        )
        if type(span) is LightSpan:
            if not record_exception:
                span._record_exception = False
            if not set_status_on_exception:
                span._set_status_on_exception = False
        return span

    def own_span(
        self,
        name: str,
        parent: SpanContext,
        kind: SpanKind,
        attributes: dict[str, Any],
        links: tuple[Link, ...] = (),
    ) -> trace_api.Span:
        """`start_span` for agentq's own spans, which know their parent's span context
        (INVALID_SPAN_CONTEXT: a root) and whose attributes are a dict of their own that
        holds the values the SDK keeps (scalars and tuples; agentq builds them so), and
        whose links are valid: none of the API's lookups and copies. No preset ids: the
        run's span goes through `start_span`."""
        return self._started(name, parent, kind, attributes, links, None, None, None)

    def _started(
        self,
        name: str,
        parent: SpanContext,
        kind: SpanKind,
        attributes: dict[str, Any],
        links: tuple[Link, ...],
        start_time: int | None,
        preset: tuple[int, int] | None,
        context: otel_context.Context | None,
    ) -> trace_api.Span:
        if parent.is_valid:
            trace_id, state = parent.trace_id, parent.trace_state
            # The default sampler: a child follows its parent; the id stays as random.
            random_id = parent.trace_flags & _RANDOM
            if not parent.trace_flags & TraceFlags.SAMPLED:
                span_id = preset[1] if preset else self._random(64)
                flags = TraceFlags(random_id)
                return trace_api.NonRecordingSpan(
                    SpanContext(trace_id, span_id, False, flags, state)
                )
            flags = _SAMPLED_RANDOM if random_id else _SAMPLED
            parent_context: SpanContext | None = parent
        else:
            parent_context = None
            trace_id = preset[0] if preset else self._random(128)
            flags, state = _SAMPLED_RANDOM, trace_api.DEFAULT_TRACE_STATE
        span_id = preset[1] if preset else self._random(64)
        span = LightSpan(
            name,
            SpanContext(trace_id, span_id, False, flags, state),
            parent_context,
            kind,
            attributes,
            links,
            start_time if start_time is not None else time_ns(),
            self,
        )
        for on_start in self._hooks()[1]:
            on_start(span, parent_context=context)
        return span

    def ended(self, span: LightSpan) -> None:
        _, _, endings, ends = self._hooks()
        for on_ending in endings:
            on_ending(span)
        for on_end in ends:
            on_end(span)

    @contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace_api.Span]:
        span = self.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        with trace_api.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current
