"""The batch span processor of agentq's own tracer provider.

What the SDK's `BatchSpanProcessor` does, with its OTEL_BSP_* settings (schedule
delay, queue size, batch size): ended spans queue up and a thread of its own
exports them a batch at a time, when a batch is full or the delay has passed,
and everything on `force_flush` and `shutdown`. What it does not do: a system
call per span (the SDK's checks `os.getpid()` for every span it queues, to
notice a fork; here the fork hook restarts the thread once, in the child) and
a lock around each queued span. Ending a span is then a deque append.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections import deque
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter

from agentq.orchestrator.tracing.light_spans import LightSpan

log = logging.getLogger("agentq.tracing")

# What instrumented HTTP clients check, so that posting spans records no span.
_SUPPRESS = getattr(otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", "suppress_instrumentation")


def _setting(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        log.warning("%s=%r is not a whole number; using %d", name, raw, default)
        return default


class SpanBatcher(SpanProcessor):
    def __init__(self, exporter: SpanExporter, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self._exporter = exporter
        self._delay_s = max(_setting(env, "OTEL_BSP_SCHEDULE_DELAY", 5000), 1) / 1000
        self._max_queue = max(_setting(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048), 1)
        batch = _setting(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)
        self._max_batch = min(max(batch, 1), self._max_queue)
        self._queue: deque[ReadableSpan] = deque()
        self._wake = threading.Event()
        self._export_lock = threading.Lock()
        self._stopped = False
        self._warned_full = False
        self._thread = self._started()
        this = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _restart(this))

    def _started(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="agentq-span-export", daemon=True)
        thread.start()
        return thread

    def on_end(self, span: ReadableSpan) -> None:
        if self._stopped:
            return
        if type(span) is not LightSpan:  # a lean span is sampled, or it would not record
            context = span.context
            if context is None or not context.trace_flags.sampled:
                return
        queue = self._queue
        if len(queue) >= self._max_queue:
            if not self._warned_full:
                self._warned_full = True
                log.warning("the span queue is full (%d): spans are dropped", self._max_queue)
            return
        queue.append(span)
        # Once, as the queue fills a batch: the export thread takes every full batch
        # there is when it wakes, so waking it again while it works only costs a lock.
        if len(queue) == self._max_batch:
            self._wake.set()

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait(self._delay_s)
            self._wake.clear()
            self._export(everything=False)
        self._export(everything=True)

    def _export(self, everything: bool) -> None:
        """A batch at least; more while full batches wait; all if `everything`."""
        with self._export_lock:
            queue = self._queue
            while queue:
                batch = [queue.popleft() for _ in range(min(self._max_batch, len(queue)))]
                token = otel_context.attach(otel_context.set_value(_SUPPRESS, True))
                try:
                    self._exporter.export(batch)
                except Exception:
                    log.exception("exporting %d spans failed", len(batch))
                finally:
                    otel_context.detach(token)
                if not everything and len(queue) < self._max_batch:
                    return

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if not self._stopped:
            self._export(everything=True)
        return True

    def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._wake.set()
        self._thread.join(30)
        self._exporter.shutdown()

    def _after_fork(self) -> None:
        """In a forked child: the parent's spans are the parent's to export, and the
        export thread did not survive the fork."""
        self._queue.clear()
        self._wake = threading.Event()
        self._export_lock = threading.Lock()
        if not self._stopped:
            self._thread = self._started()


def _restart(ref: weakref.ReferenceType[Any]) -> None:
    batcher = ref()
    if batcher is not None:
        batcher._after_fork()
