"""What tracing costs a step: agentq with no tracer provider vs. the OpenTelemetry SDK
exporting OTLP/HTTP to a receiver, measured in one run on one machine.

    python bench/tracing_bench.py [--quick]

Starts three throwaway redis-servers and, on each, one `WorkerRuntime` process (model
and tools queues): one without a tracer provider ("none"); one set up as `agentq
worker` sets itself up when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set ("agentq":
`tracing.setup_tracing`, the SDK's `TracerProvider`, `BatchSpanProcessor` and
OTLP/HTTP `OTLPSpanExporter`); one with an application's own provider, the SDK's
`BatchSpanProcessor(OTLPSpanExporter)` set up by hand ("app": what agentq uses as
the application set it up). Both post to an OTLP/HTTP sink in another process that
reads and discards the requests. Runs of N steps (scripted model, one no-op tool call
per step) rotate between them, so the noise of a shared machine falls on all alike.
Figures:

- per step: (start -> finish event) / N, median over runs; a ratio traced/untraced is
  the median of per-pair ratios;
- worker CPU per step: the worker process's user+system CPU (the exporter's thread
  included, flushed before each reading) per run, divided by its steps; the CPU a
  mode adds is the median over rotations of (its run - the untraced run), the mean
  shown beside it.

Goal (issue 24), for "agentq": <= +1 ms worker CPU per step, the accepted price of
the SDK's spans and exporter. With no provider the tracing code returns at once: the
untraced worker is today's worker. Prints PASS/MISS; never asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import statistics
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.context import SpawnContext, SpawnProcess
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
for path in (_HERE, _HERE.parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from core_bench import _free_port, at, noop, redis_server, run_events, step_spec  # noqa: E402
from verdicts import verdict  # noqa: E402

from agentq.orchestrator.client import Client  # noqa: E402
from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE  # noqa: E402
from agentq.workers.tools.function import FunctionExecutor  # noqa: E402
from agentq.workers.worker.runtime import WorkerRuntime  # noqa: E402

MODES = ("none", "agentq", "app")
CPU_GOAL_MS = 1.0


# -- the OTLP sink -------------------------------------------------------------------------


def _sink_child(port: int) -> None:
    class Sink(BaseHTTPRequestHandler):
        # Keeps the connection, as OTLP collectors do (the Collector, Phoenix, Jaeger).
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()


# -- a worker process, with or without tracing -----------------------------------------------


def _cpu_s() -> float:
    return time.process_time()  # user + system, every thread, ns resolution


async def _worker_main(
    url: str, mode: str, endpoint: str, ready: MpEvent, stop: MpEvent, report: Any
) -> None:
    provider: Any = None
    if mode == "agentq":  # what `agentq worker` does with OTEL_EXPORTER_OTLP_ENDPOINT set
        from agentq.orchestrator import tracing
        from agentq.orchestrator.tracing.provider import installed_provider

        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint
        tracing.setup_tracing("agentq-worker")
        provider = installed_provider()
    elif mode == "app":  # an application's own provider, exporter and all: the SDK's
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        trace.set_tracer_provider(provider)
    runtime = WorkerRuntime(
        url,
        executors=[FunctionExecutor([noop])],
        queues=[MODEL_QUEUE, TOOLS_QUEUE],
        freeze_startup_heap=True,  # as `agentq worker` does
    )
    await runtime.start()
    ready.set()
    while True:
        command = await asyncio.to_thread(report.recv)
        if command == "stop":
            break
        if provider is not None:  # what the exporter still holds is this run's cost too
            await asyncio.to_thread(provider.force_flush)
        report.send(_cpu_s())
    stop.set()
    await runtime.stop()
    if provider is not None:
        provider.shutdown()


def _worker_child(
    url: str, mode: str, endpoint: str, ready: MpEvent, stop: MpEvent, report: Any
) -> None:
    asyncio.run(_worker_main(url, mode, endpoint, ready, stop, report))


class Worker:
    def __init__(self, ctx: SpawnContext, url: str, mode: str, endpoint: str) -> None:
        self.ready, self.stop = ctx.Event(), ctx.Event()
        self.conn, child = ctx.Pipe()
        self.proc: SpawnProcess = ctx.Process(
            target=_worker_child,
            args=(url, mode, endpoint, self.ready, self.stop, child),
            daemon=True,
        )
        self.proc.start()
        if not self.ready.wait(60):
            raise RuntimeError("the worker did not start")

    def cpu_s(self) -> float:
        self.conn.send("cpu")
        value: float = self.conn.recv()
        return value

    def close(self) -> None:
        self.conn.send("stop")
        self.proc.join(15)
        if self.proc.is_alive():
            self.proc.terminate()


# -- the measurement -------------------------------------------------------------------------


async def _step_ms(client: Client, steps: int) -> float:
    events = await run_events(client, step_spec(steps))
    return (at(events, "finish") - at(events, "start")) / steps * 1000


async def measure(runs: int, steps: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    port = _free_port()
    sink = ctx.Process(target=_sink_child, args=(port,), daemon=True)
    sink.start()
    endpoint = f"http://127.0.0.1:{port}/v1/traces"
    with redis_server() as url_none, redis_server() as url_agentq, redis_server() as url_app:
        urls = {"none": url_none, "agentq": url_agentq, "app": url_app}
        workers = {mode: Worker(ctx, url, mode, endpoint) for mode, url in urls.items()}
        clients = {mode: Client(url) for mode, url in urls.items()}
        try:
            for client in clients.values():  # warm up: scripts loaded, imports done
                await _step_ms(client, 5)
            per_step: dict[str, list[float]] = {mode: [] for mode in MODES}
            run_cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
            last_cpu = {mode: w.cpu_s() for mode, w in workers.items()}
            for i in range(runs):
                order = MODES[i % len(MODES) :] + MODES[: i % len(MODES)]
                for mode in order:
                    per_step[mode].append(await _step_ms(clients[mode], steps))
                    now = workers[mode].cpu_s()  # flushed first: the export is this run's
                    run_cpu[mode].append((now - last_cpu[mode]) / steps * 1000)
                    last_cpu[mode] = now
        finally:
            for client in clients.values():
                await client.aclose()
            for w in workers.values():
                w.close()
            sink.terminate()
    return {
        "step_ms": {m: statistics.median(v) for m, v in per_step.items()},
        "ratio": {
            mode: statistics.median(
                t / n for n, t in zip(per_step["none"], per_step[mode], strict=True)
            )
            for mode in ("agentq", "app")
        },
        # CPU per step over all runs, and the CPU a mode adds per step: the median over
        # the rotations of (its run - the untraced run), robust to a burst of load
        # from other processes during one run.
        "cpu_ms": {m: statistics.fmean(v) for m, v in run_cpu.items()},
        "added_cpu_ms": {
            mode: statistics.median(
                t - n for n, t in zip(run_cpu["none"], run_cpu[mode], strict=True)
            )
            for mode in ("agentq", "app")
        },
    }


# -- the SDK's share --------------------------------------------------------------------


SPANS_PER_STEP = 6  # process model, chat, send tools, process tools, execute_tool, send model


def sdk_share_us(n: int = 5000) -> tuple[float, float]:
    """CPU per span that the OpenTelemetry SDK itself takes, outside agentq: making and
    ending a span with a queue span's attributes, and encoding it to OTLP protobuf (what
    the batch processor's thread does): the share of the added CPU that is the SDK's."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    kept: list[ReadableSpan] = []

    class Keep(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            kept.extend(spans)
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Keep()))
    tracer = provider.get_tracer("share")
    attributes: dict[str, str | int] = {
        "messaging.system": "redis",
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": "tools",
        "messaging.message.id": "aq:0123456789abcdef:call:3:call_0",
        "agentq.step": 3,
    }
    bare = TracerProvider().get_tracer("share")
    started = time.process_time()
    for _ in range(n):
        bare.start_span("process tools", attributes=attributes).end()
    make_us = (time.process_time() - started) / n * 1e6
    for _ in range(n):
        tracer.start_span("process tools", attributes=attributes).end()
    started = time.process_time()
    for i in range(0, n, 512):
        encode_spans(kept[i : i + 512]).SerializePartialToString()
    encode_us = (time.process_time() - started) / n * 1e6
    return make_us, encode_us


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter runs")
    args = parser.parse_args()
    runs, steps = (2, 20) if args.quick else (12, 100)
    with contextlib.suppress(KeyboardInterrupt):
        figures = asyncio.run(measure(runs, steps))
        step, cpu, ratio = figures["step_ms"], figures["cpu_ms"], figures["ratio"]
        added_cpu = figures["added_cpu_ms"]
        print(f"{runs} runs x {steps} steps per mode, alternating; load average {_load()}")
        print(f"per step, no provider:                    {step['none']:.3f} ms")
        print(f"per step, agentq's SDK setup (OTLP/HTTP): {step['agentq']:.3f} ms")
        print(f"  ratio {ratio['agentq']:.3f}")
        print(f"per step, an app's SDK provider + OTLP:   {step['app']:.3f} ms")
        print(f"  ratio {ratio['app']:.3f}")
        print(f"worker CPU per step, no provider:         {cpu['none']:.3f} ms")
        print(f"worker CPU per step, agentq's SDK setup:  {cpu['agentq']:.3f} ms")
        mark = verdict(added_cpu["agentq"] <= CPU_GOAL_MS, timed=True, quick=args.quick)
        print(
            f"  added {added_cpu['agentq']:.3f} ms, median of paired runs"
            f" (mean {cpu['agentq'] - cpu['none']:.3f}; goal <= {CPU_GOAL_MS} ms):"
            f" {mark}"
        )
        print(f"worker CPU per step, an app's SDK export: {cpu['app']:.3f} ms")
        print(
            f"  added {added_cpu['app']:.3f} ms, median of paired runs"
            f" (mean {cpu['app'] - cpu['none']:.3f}; no goal)"
        )
        make_us, encode_us = sdk_share_us()
        share_ms = SPANS_PER_STEP * (make_us + encode_us) / 1000
        print(
            f"SDK alone: {make_us:.1f} us to make a span, {encode_us:.1f} us to encode it;"
            f" {SPANS_PER_STEP} spans per step = {share_ms:.3f} ms CPU"
        )


if __name__ == "__main__":
    main()
