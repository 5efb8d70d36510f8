"""The `agentq` command line.

Exit codes are a contract (see `agentq.cli.errors`): 0 success, 1 the run
failed or was cancelled, 2 bad input, 3 infrastructure, 4 timed out,
130 interrupted. Data goes to stdout (`--json` for machines), everything
else to stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from agentq.cli.connect import open_client, shared_redis, with_client
from agentq.cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_INFRASTRUCTURE,
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_TIMED_OUT,
    CliError,
    check_redis_url,
    fail,
    guarded,
    load_settings,
    shown_url,
)
from agentq.cli.options import (
    CONTEXT,
    JSON_OPTION,
    MCP_OPTION,
    MODELS_OPTION,
    REDIS_OPTION,
    THREAD_OPTION,
    TIMEOUT_OPTION,
    TOOLS_OPTION,
    json_option,
    mcp_option,
    timeout_option,
)

# Every module of the CLI imports only click and the standard library at its top, and
# the rest inside the commands: `agentq -h` then costs about what Python and click do.
if TYPE_CHECKING:
    from agentq.orchestrator.client import Client
    from agentq.orchestrator.core.settings import Settings
    from agentq.orchestrator.runs.result import RunResult
    from agentq.orchestrator.spec.run import RunSpec
    from agentq.workers.worker.metrics import WorkerMetrics
    from agentq.workers.worker.runtime import WorkerRuntime


def _settings(models_path: str | None) -> Settings:
    """The environment's settings, with the command's --models over $AGENTQ_MODELS."""
    settings = load_settings()
    if models_path is not None:
        settings = settings.model_copy(update={"models": models_path})
    return settings


def _read_spec(path: str) -> RunSpec:
    from pydantic import ValidationError

    from agentq.orchestrator.core.errors import SpecError
    from agentq.orchestrator.spec.run import RunSpec

    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read spec {path!r}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"spec {path!r} is not UTF-8 text (byte {exc.start}: {data[exc.start]:#04x})"
        ) from None
    try:
        return RunSpec.model_validate_json(text)
    except ValidationError as exc:
        if exc.errors()[0]["type"] == "json_invalid":
            raise SpecError(f"spec {path!r} is not valid JSON: {exc.errors()[0]['msg']}") from None
        raise


def _on_thread(spec: RunSpec, thread_id: str | None) -> RunSpec:
    """The spec with --thread's thread (its id is checked when the run takes its turn)."""
    return spec if thread_id is None else spec.model_copy(update={"thread_id": thread_id})


def _with_concurrency(spec: RunSpec, key: str | None, max_running: int | None) -> RunSpec:
    """The spec with --concurrency-key/--concurrency-max's key (both or neither)."""
    from pydantic import ValidationError

    from agentq.orchestrator.concurrency.spec import Concurrency
    from agentq.orchestrator.core.errors import SpecError

    if key is None and max_running is None:
        return spec
    if key is None or max_running is None:
        raise SpecError("--concurrency-key and --concurrency-max go together")
    try:
        concurrency = Concurrency(key=key, max=max_running)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise SpecError(f"concurrency.{error['loc'][0]}: {error['msg']}") from None
    return spec.model_copy(update={"concurrency": concurrency})


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _print_result(result: RunResult) -> None:
    click.echo(result.model_dump_json(indent=2))


def _exit_for(result: RunResult) -> None:
    sys.exit(EXIT_OK if result.succeeded else EXIT_RUN_FAILED)


def _mcp_config_path(flag: str | None) -> str | None:
    return flag or os.environ.get("AGENTQ_MCP_CONFIG") or None


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="agentq", message="%(prog)s %(version)s")
def main() -> None:
    """Run LLM agent loops as durable distributed jobs on Redis.

    \b
    Exit codes: 0 success, 1 the run failed or was cancelled, 2 bad input,
    3 infrastructure (Redis, Docker), 4 timed out, 130 interrupted.
    Shell completion: eval "$(_AGENTQ_COMPLETE=bash_source agentq)" (zsh_source, fish_source).
    """


# -- run ---------------------------------------------------------------------


@main.command(context_settings=CONTEXT)
@click.argument("spec_path", metavar="SPEC")
@REDIS_OPTION
@TOOLS_OPTION
@MCP_OPTION
@MODELS_OPTION
@THREAD_OPTION
@json_option("Print only the RunResult, as JSON.")
@timeout_option("Cancel the run after S seconds (exit 4).")
def run(
    spec_path: str,
    redis_url: str | None,
    tool_modules: Sequence[str],
    mcp_config: str | None,
    models_path: str | None,
    thread_id: str | None,
    as_json: bool,
    timeout_s: float | None,
) -> None:
    """Run SPEC (a JSON file, or - for stdin) and show its progress live.

    Embedded (an in-memory Redis and workers in this process) unless --redis or
    $AGENTQ_REDIS_URL names a shared Redis, where workers anywhere take its jobs.
    """
    source = click.get_current_context().get_parameter_source("redis_url")
    from_env = source == ParameterSource.ENVIRONMENT
    result = guarded(_run)(
        spec_path,
        redis_url,
        from_env,
        tool_modules,
        mcp_config,
        models_path,
        as_json,
        timeout_s,
        thread_id,
    )
    _exit_for(result)


async def _run(
    spec_path: str,
    redis_url: str | None,
    from_env: bool,
    tool_modules: Sequence[str],
    mcp_config: str | None,
    models_path: str | None,
    as_json: bool,
    timeout_s: float | None,
    thread_id: str | None,
) -> RunResult:
    from agentq.cli.live import RunTimedOut, drive
    from agentq.cli.render import ProgressPrinter, make_console
    from agentq.orchestrator import tracing
    from agentq.orchestrator.client import Client
    from agentq.orchestrator.redis.connect import is_memory_url
    from agentq.orchestrator.tools.code import CodeToolSpec
    from agentq.workers.tools.assemble import optional_executors
    from agentq.workers.worker.embedded import embedded
    from agentq.workers.worker.loading import load_tool_modules

    settings = _settings(models_path)
    if redis_url:
        check_redis_url(redis_url)
    # An MCP server this run needs and that fails is reported once, by the CLI.
    logging.getLogger("agentq.workers.tools.mcp.executor").setLevel(logging.ERROR)
    tracing.setup_tracing("agentq")
    # Tool modules first: one may register a tool kind or a provider the spec uses.
    tools = load_tool_modules(tool_modules)
    spec = _on_thread(_read_spec(spec_path), thread_id)
    console = make_console(stderr=as_json, quiet=as_json)
    shared = bool(redis_url) and not is_memory_url(redis_url or "")
    if shared and from_env:
        console.print(
            f"[dim]joining the shared Redis at {shown_url(redis_url or '')} "
            "($AGENTQ_REDIS_URL is set): workers there run this run's jobs[/]"
        )
    code_tools = [t.tool_name for t in spec.tools if isinstance(t, CodeToolSpec)]
    # Embedded, code tools run in this process's sandbox (when Docker works here).
    in_process_sandbox = bool(code_tools) and not shared
    executors = await optional_executors(
        mcp_config=_mcp_config_path(mcp_config), sandbox=in_process_sandbox
    )
    printer = ProgressPrinter(console)
    interactive = sys.stdin.isatty() and not as_json
    try:
        if shared and not tool_modules and not executors:
            async with Client(redis_url, settings=settings) as client:
                run_id = await client.runs.submit(spec)
                result = await drive(
                    client,
                    run_id,
                    printer,
                    interactive=interactive,
                    private=False,
                    timeout_s=timeout_s,
                )
        else:
            started = False
            async with (
                _sandbox_explained(code_tools, lambda: started),
                embedded(
                    tools=tools, executors=executors, redis_url=redis_url, settings=settings
                ) as client,
            ):
                started = True
                _check_mcp_servers(spec, executors, _mcp_config_path(mcp_config))
                run_id = await client.runs.submit(spec)
                result = await drive(
                    client,
                    run_id,
                    printer,
                    interactive=interactive,
                    private=not shared,
                    timeout_s=timeout_s,
                )
    except RunTimedOut:
        raise CliError(
            f"timed out after {timeout_s:g} s (the run was cancelled)", EXIT_TIMED_OUT
        ) from None
    if as_json:
        _print_result(result)
    else:
        printer.summary(result)
    return result


def _check_mcp_servers(spec: RunSpec, executors: Sequence[Any], config: str | None) -> None:
    """A server the spec needs that did not start here: say why, not 'undeclared'."""
    from agentq.orchestrator.tools.mcp import McpToolSpec

    failures: dict[str, str] = {}
    for executor in executors:
        failures.update(getattr(executor, "failures", {}))
    for tool in spec.tools:
        if isinstance(tool, McpToolSpec) and tool.server in failures:
            why = failures[tool.server].split(": ", 1)[-1]
            raise CliError(
                f"the MCP server {tool.server!r} (declared in {config}) did not start: {why}",
                EXIT_INFRASTRUCTURE,
            )


@contextlib.asynccontextmanager
async def _sandbox_explained(
    code_tools: list[str], started: Callable[[], bool]
) -> AsyncIterator[None]:
    """The in-process sandbox failed to start: say plainly what embedded mode cannot do."""
    from agentq.orchestrator.core.errors import AgentqError, SpecError

    try:
        yield
    except AgentqError as exc:
        if not code_tools or started():
            raise
        raise SpecError(
            f"this spec uses code tools ({', '.join(code_tools)}), which run in Docker "
            f"containers, and the sandbox cannot start here: {exc.message}. Fix that (Docker "
            "running, `agentq sandbox build-images`), or run them on a sandbox worker: "
            "`agentq worker --sandbox --redis URL`, then `agentq run SPEC --redis URL`"
        ) from None


# -- worker ------------------------------------------------------------------


@main.command(context_settings=CONTEXT)
@REDIS_OPTION
@TOOLS_OPTION
@click.option(
    "--queue",
    "queues",
    multiple=True,
    metavar="NAME",
    help="Queues to serve (repeatable; default: model and tools; with --sandbox: sandbox, and"
    " tools if it has tools).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Jobs at once per queue (default: $AGENTQ_CONCURRENCY or 16).",
)
@MCP_OPTION
@click.option("--sandbox", is_flag=True, help="Serve sandboxed code tools (needs Docker).")
@click.option(
    "--drain-timeout",
    "drain_timeout_s",
    type=float,
    default=None,
    help="On SIGTERM, let running jobs finish for up to S seconds (default 30), then "
    "release the rest to other workers.",
)
@MODELS_OPTION
@click.option(
    "--metrics-port", type=int, default=None, metavar="PORT", help="Serve Prometheus /metrics here."
)
@click.option(
    "--health-port", type=int, default=None, metavar="PORT", help="Serve /livez and /readyz here."
)
@click.option(
    "--probe-host", default="0.0.0.0", show_default=True, help="Address the two ports bind."
)
@click.option("-v", "--verbose", is_flag=True, help="Log each job (INFO level).")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    envvar="AGENTQ_LOG_FORMAT",
    default="text",
    show_default=True,
    help="json: one object per line with trace_id, span_id, run, job and queue.",
)
def worker(
    redis_url: str | None,
    tool_modules: Sequence[str],
    queues: Sequence[str],
    concurrency: int | None,
    mcp_config: str | None,
    sandbox: bool,
    drain_timeout_s: float | None,
    models_path: str | None,
    metrics_port: int | None,
    health_port: int | None,
    probe_host: str,
    verbose: bool,
    log_format: str,
) -> None:
    """Execute the jobs of runs submitted anywhere.

    SIGTERM or SIGINT drains: no new jobs are claimed, running ones finish (up to
    --drain-timeout), the rest go back to the queue for other workers; a second
    signal stops at once."""
    import logging

    from agentq.logs import configure_logging

    configure_logging(
        "json" if log_format == "json" else "text", logging.INFO if verbose else logging.WARNING
    )
    probes = _Probes(metrics_port, health_port, probe_host)
    guarded(_worker)(
        redis_url,
        tool_modules,
        queues,
        concurrency,
        mcp_config,
        sandbox,
        models_path,
        probes,
        drain_timeout_s,
    )


async def _worker(
    redis_url: str | None,
    tool_modules: Sequence[str],
    queues: Sequence[str],
    concurrency: int | None,
    mcp_config: str | None,
    sandbox: bool,
    models_path: str | None,
    probes: _Probes,
    drain_timeout_s: float | None,
) -> None:
    import asyncio

    from agentq.orchestrator import tracing
    from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
    from agentq.orchestrator.policy.endpoints import EndpointPolicy
    from agentq.workers.tools.assemble import optional_executors
    from agentq.workers.tools.function import FunctionExecutor
    from agentq.workers.worker.loading import load_tool_modules
    from agentq.workers.worker.runtime import WorkerRuntime

    url = shared_redis(redis_url, "worker")
    settings = _settings(models_path)
    # Read the models file now: a bad one stops the worker at start, not at its first call.
    EndpointPolicy.from_settings(settings)
    if concurrency is not None:
        settings = settings.model_copy(update={"concurrency": concurrency})
    if drain_timeout_s is not None:
        settings = settings.model_copy(update={"drain_timeout_s": drain_timeout_s})
    tools = load_tool_modules(tool_modules)
    tracing.setup_tracing("agentq-worker")
    started: list[WorkerRuntime] = []

    async def reannounce(_server: str) -> None:
        # An MCP server's tool list changed: publish the new one.
        for runtime_ in started:
            await runtime_.announce()

    executors = [
        FunctionExecutor(tools),
        *await optional_executors(
            mcp_config=_mcp_config_path(mcp_config),
            sandbox=sandbox,
            on_tools_changed=reannounce,
            redis_url=url,
        ),
    ]
    # A worker given no tool modules (functions or kinds) and no MCP servers does not take
    # the tools queue's jobs; a sandbox worker takes no model steps (a sandbox pool then
    # needs neither the models file nor provider keys).
    serves_tools = bool(tool_modules) or _mcp_config_path(mcp_config) is not None
    served = list(queues) or (
        ([] if sandbox else [MODEL_QUEUE])
        + ([TOOLS_QUEUE] if serves_tools else [])
        + (["sandbox"] if sandbox else [])
    )
    tool_queue = next((q for q in served if q != MODEL_QUEUE), TOOLS_QUEUE)
    runtime = WorkerRuntime(
        url,
        executors=executors,
        queues=served,
        tool_queue=tool_queue,
        settings=settings,
        metrics=probes.metrics(),
        freeze_startup_heap=True,
        wait_for_redis=True,
    )
    try:
        await runtime.start()
    except BaseException:
        await runtime.stop()
        raise
    started.append(runtime)
    stop_probes = probes.serve(runtime)
    stop = asyncio.Event()
    signals = 0
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        stop.set()
        if signals > 1 and drainer is not None:
            drainer.cancel()  # a second signal: stop now

    drainer: asyncio.Task[int] | None = None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    by_kind: dict[str, list[str]] = {}
    for ann in runtime.announcements:
        label = f"{ann.server}/{ann.name}" if ann.kind == "mcp" and ann.server else ann.name
        by_kind.setdefault(ann.kind, []).append(label)
    listed = "; ".join(
        f"{kind} tools {', '.join(sorted(names))}" for kind, names in by_kind.items()
    )
    click.echo(
        f"agentq worker {runtime.worker_id} on {shown_url(url)}: queues {', '.join(served)}; "
        f"{listed or 'tools -'}; concurrency {settings.concurrency}",
        err=True,
    )
    waiter = asyncio.create_task(runtime.wait())
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set() and not waiter.done():
            drainer = asyncio.create_task(runtime.drain(settings.drain_timeout_s))
            with contextlib.suppress(asyncio.CancelledError):
                await drainer
    finally:
        waiter.cancel()
        stopper.cancel()
        stop_probes()
        await runtime.stop()
        tracing.shutdown_tracing()
    if waiter.done() and not waiter.cancelled() and waiter.exception():
        raise waiter.exception()  # type: ignore[misc]


class _Probes:
    """`--metrics-port` and `--health-port`: HTTP servers on threads beside the worker."""

    def __init__(self, metrics_port: int | None, health_port: int | None, host: str) -> None:
        self.metrics_port = metrics_port
        self.health_port = health_port
        self.host = host
        self._metrics: WorkerMetrics | None = None

    def metrics(self) -> WorkerMetrics | None:
        if self.metrics_port is not None:
            from agentq.workers.worker.metrics import WorkerMetrics

            self._metrics = WorkerMetrics()
        return self._metrics

    def serve(self, runtime: WorkerRuntime) -> Callable[[], None]:
        """Start the servers; return what stops them. A taken port is the user's to fix."""
        import asyncio

        from agentq.workers.worker.health import HealthServer, readiness_check

        loop = asyncio.get_running_loop()
        stops: list[Callable[[], None]] = []
        try:
            if self._metrics is not None and self.metrics_port is not None:
                self._metrics.watch(runtime, loop)
                stops.append(self._metrics.serve(self.metrics_port, self.host))
            if self.health_port is not None:
                health = HealthServer(
                    readiness_check(runtime), loop, port=self.health_port, host=self.host
                )
                stops.append(health.start().close)
        except OSError as exc:
            from agentq.orchestrator.core.errors import SpecError

            for stop in stops:
                stop()
            raise SpecError(f"cannot serve probes on {self.host}: {exc.strerror}") from None

        def stop_all() -> None:
            for stop in stops:
                stop()

        return stop_all


# -- client commands -----------------------------------------------------------


@main.command(context_settings=CONTEXT)
@click.argument("spec_path", metavar="SPEC")
@click.option(
    "--at",
    "start_at",
    metavar="TIME",
    help="Start the run at TIME (ISO 8601 with a zone, e.g. 2026-12-01T09:00Z).",
)
@click.option(
    "--in", "delay", metavar="DURATION", help="Start the run after DURATION (30s, 10m, 2h)."
)
@REDIS_OPTION
@TIMEOUT_OPTION
@MODELS_OPTION
@THREAD_OPTION
@JSON_OPTION
@click.option("--tenant", help="Whose run it is (default: the spec's metadata.tenant).")
@click.option(
    "--priority",
    metavar="low|normal|high|0-9",
    help="Overrides the spec's priority: taken before lower ones of its fairness key.",
)
@click.option(
    "--concurrency-key",
    metavar="KEY",
    help="At most --concurrency-max runs of the tenant's KEY run at once (overrides the spec's).",
)
@click.option(
    "--concurrency-max", type=int, metavar="N", help="How many runs of --concurrency-key at once."
)
def submit(
    spec_path: str,
    start_at: str | None,
    delay: str | None,
    redis_url: str | None,
    timeout_s: float | None,
    models_path: str | None,
    thread_id: str | None,
    as_json: bool,
    tenant: str | None,
    priority: str | None,
    concurrency_key: str | None,
    concurrency_max: int | None,
) -> None:
    """Submit SPEC (a JSON file, or - for stdin) and print the run id. With --at or
    --in the run is created `scheduled` and starts then (`agentq cancel` stops it)."""

    async def go() -> None:
        import time

        from agentq.orchestrator.core.start_times import start_time

        start_time(at=start_at, delay=delay, now=time.time())  # judged before connecting
        spec = _on_thread(_read_spec(spec_path), thread_id)
        spec = _with_concurrency(spec, concurrency_key, concurrency_max)
        async with open_client(redis_url, "submit", _settings(models_path)) as client:
            # A delay counts from the submit itself, not from before the client loaded.
            when = start_time(at=start_at, delay=delay, now=time.time())
            run_id = await client.runs.submit(spec, tenant=tenant, priority=priority, start_at=when)
        _echo_json({"run_id": run_id}) if as_json else click.echo(run_id)

    guarded(go, timeout_s)()


@main.command(context_settings=CONTEXT)
@click.argument("run_id")
@REDIS_OPTION
@timeout_option("Give up after S seconds (exit 4; the run goes on).")
def wait(run_id: str, redis_url: str | None, timeout_s: float | None) -> None:
    """Wait for RUN_ID to end and print its RunResult as JSON. Exit 0 iff it succeeded."""

    async def go() -> RunResult:
        async with open_client(redis_url, "wait") as client:
            return await client.runs.wait(run_id, timeout_s=timeout_s)

    # The client's own timeout says "the run did not finish" (exit 4); this outer one
    # only catches what lies outside it (connecting, closing) a moment later.
    result = guarded(go, None if timeout_s is None else timeout_s + 1.0)()
    _print_result(result)
    _exit_for(result)


@main.command(context_settings=CONTEXT)
@click.argument("run_id")
@REDIS_OPTION
@TIMEOUT_OPTION
@JSON_OPTION
def status(run_id: str, redis_url: str | None, timeout_s: float | None, as_json: bool) -> None:
    """Show RUN_ID now, without waiting: status, step, and what it waits for.

    Pending calls show their CALL_ID (for approve and tool-result) and an MCP
    question its REQUEST_ID (for answer). Exit 0 whatever the run's status.
    """

    from agentq.cli.render import make_console, print_status
    from agentq.orchestrator.runs.result import TERMINAL_STATUSES

    async def go(client: Client) -> None:
        head = await client.runs.status(run_id)
        result = await client.runs.result(run_id)
        if as_json:
            _echo_json(
                {
                    "id": result.id,
                    "status": result.status,
                    "step": head.step,
                    "held": head.held,
                    "steps_done": len(result.steps),
                    "pending": result.pending,
                    "error": result.error.model_dump() if result.error else None,
                    "usage": result.usage.model_dump(),
                    "text": result.text if result.status in TERMINAL_STATUSES else None,
                    "output": result.output,
                    "concurrency": result.concurrency.model_dump() if result.concurrency else None,
                }
            )
        else:
            console = make_console()
            print_status(console, result, head.step)
            if head.held is not None:
                console.print(f"held: budget {head.held} is reached (raising it sends the step on)")

    with_client(redis_url, "status", go, timeout_s)


@main.command(context_settings=CONTEXT)
@REDIS_OPTION
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(["running", "awaiting", "succeeded", "failed", "cancelled"]),
    help="Only runs in this status (repeatable).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=10_000),
    default=20,
    show_default=True,
    help="At most this many runs, newest first.",
)
@TIMEOUT_OPTION
@JSON_OPTION
def runs(
    redis_url: str | None,
    statuses: Sequence[str],
    limit: int,
    timeout_s: float | None,
    as_json: bool,
) -> None:
    """List recent runs, newest first."""
    from agentq.cli.render import make_console, print_runs

    async def go(client: Client) -> None:
        found = await client.runs.recent(limit=limit, statuses=statuses)
        if as_json:
            _echo_json([r.model_dump() for r in found])
        else:
            print_runs(make_console(), found)

    with_client(redis_url, "runs", go, timeout_s)


@main.command(context_settings=CONTEXT)
@REDIS_OPTION
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=None,
    metavar="S",
    help="Wait up to S seconds for a live worker (serving TOOL with --tool); exit 4 if none.",
)
@click.option("--tool", default=None, metavar="TOOL", help="With --wait: a worker serving TOOL.")
@JSON_OPTION
def workers(redis_url: str | None, wait_s: float | None, tool: str | None, as_json: bool) -> None:
    """List live workers: host, pid, queues, tools, jobs in flight of their concurrency,
    last seen."""
    from agentq.cli.render import make_console, print_workers

    async def go(client: Client) -> None:
        import asyncio
        import time

        found = await client.fleet.workers()
        deadline = time.monotonic() + (wait_s or 0)
        while wait_s is not None and not [w for w in found if not tool or tool in w.tools]:
            if time.monotonic() >= deadline:
                serving = f" serving {tool!r}" if tool else ""
                raise CliError(
                    f"timed out: no live worker{serving} after {wait_s:g} s", EXIT_TIMED_OUT
                )
            await asyncio.sleep(0.2)
            found = await client.fleet.workers()
        if as_json:
            _echo_json([w.model_dump() for w in found])
        else:
            print_workers(make_console(), found)

    with_client(redis_url, "workers", go)


@main.command(context_settings=CONTEXT)
@click.argument("run_id")
@REDIS_OPTION
@click.option(
    "--after",
    type=click.IntRange(min=0, max=2**63 - 1),  # a seq is a Redis counter (signed 64-bit)
    default=None,
    metavar="SEQ",
    help="Only events after this seq (resume without gaps).",
)
@click.option("--follow", is_flag=True, help="Keep printing until the run ends.")
@TIMEOUT_OPTION
def events(
    run_id: str, redis_url: str | None, after: int | None, follow: bool, timeout_s: float | None
) -> None:
    """Print the run's events as JSON lines."""
    following = False

    async def go(client: Client) -> None:
        nonlocal following
        await client.runs.status(run_id)  # a clear error for an unknown run
        following = follow
        async for event in client.runs.events(run_id, after=after, follow=follow):
            click.echo(event.model_dump_json(exclude_none=True))

    def why() -> str:
        # Redis has answered: the time ran out waiting for the run itself.
        if following:
            return f"run {run_id} was quiet (no new event; it has not ended)"
        return "Redis did not answer in time"

    with_client(redis_url, "events", go, timeout_s, why)


@main.command(context_settings=CONTEXT)
@click.argument("run_id")
@click.argument("call_id")
@REDIS_OPTION
@click.option("--deny", is_flag=True, help="Deny the call instead of approving it.")
@click.option("--reason", default=None, metavar="TEXT", help="Why (the model sees it).")
@click.option(
    "--input",
    "input_json",
    default=None,
    metavar="JSON",
    help="Run the call with this input instead (checked against the tool's schema).",
)
@TIMEOUT_OPTION
def approve(
    run_id: str,
    call_id: str,
    redis_url: str | None,
    deny: bool,
    reason: str | None,
    input_json: str | None,
    timeout_s: float | None,
) -> None:
    """Approve (or --deny) a call that waits for approval (CALL_ID: see `agentq status`)."""
    edited = None
    if input_json is not None:
        if deny:
            fail("--input goes with an approval, not --deny", EXIT_BAD_INPUT)
        try:
            edited = json.loads(input_json)
        except ValueError as exc:
            fail(f"--input is not valid JSON: {exc}", EXIT_BAD_INPUT)

    async def go(client: Client) -> None:
        await client.runs.approve(run_id, call_id, approved=not deny, reason=reason, input=edited)

    with_client(redis_url, "approve", go, timeout_s)


@main.command("tool-result", context_settings=CONTEXT)
@click.argument("run_id")
@click.argument("call_id")
@REDIS_OPTION
@click.option("--output", "output_json", required=True, metavar="JSON", help="The result, as JSON.")
@click.option("--error", "is_error", is_flag=True, help="The output is an error message.")
@TIMEOUT_OPTION
def tool_result(
    run_id: str,
    call_id: str,
    redis_url: str | None,
    output_json: str,
    is_error: bool,
    timeout_s: float | None,
) -> None:
    """Post the result of a call that waits for one (a client tool).

    CALL_ID: see `agentq status`.
    """
    try:
        output = json.loads(output_json)
    except ValueError as exc:
        fail(f"--output is not valid JSON: {exc}", EXIT_BAD_INPUT)

    async def go(client: Client) -> None:
        await client.runs.submit_tool_result(run_id, call_id, output, is_error=is_error)

    with_client(redis_url, "tool-result", go, timeout_s)


@main.command(context_settings=CONTEXT)
@click.argument("run_id")
@click.argument("request_id")
@REDIS_OPTION
@click.option(
    "--json", "answer_json", default=None, metavar="OBJECT", help="The answer, a JSON object."
)
@click.option("--decline", is_flag=True, help="Decline to answer.")
@TIMEOUT_OPTION
def answer(
    run_id: str,
    request_id: str,
    redis_url: str | None,
    answer_json: str | None,
    decline: bool,
    timeout_s: float | None,
) -> None:
    """Answer an MCP server's question (REQUEST_ID: see `agentq status`), or --decline it."""
    if decline == (answer_json is not None):
        fail("give either --json ANSWER or --decline", EXIT_BAD_INPUT)
    content: dict[str, Any] | None = None
    if answer_json is not None:
        try:
            content = json.loads(answer_json)
        except ValueError as exc:
            fail(f"--json is not valid JSON: {exc}", EXIT_BAD_INPUT)
        if not isinstance(content, dict):
            fail("--json must be a JSON object", EXIT_BAD_INPUT)

    async def go(client: Client) -> None:
        await client.runs.answer(run_id, request_id, content)

    with_client(redis_url, "answer", go, timeout_s)


@main.command(context_settings=CONTEXT)
@click.argument("run_id")
@REDIS_OPTION
@click.option("--reason", default=None, metavar="TEXT", help="Why (kept in the run's events).")
@TIMEOUT_OPTION
@JSON_OPTION
def cancel(
    run_id: str, redis_url: str | None, reason: str | None, timeout_s: float | None, as_json: bool
) -> None:
    """Cancel a run and print its status afterwards (a finished run stays finished)."""

    async def go(client: Client) -> None:
        outcome = await client.runs.cancel(run_id, reason=reason)
        _echo_json({"run_id": run_id, "outcome": outcome}) if as_json else click.echo(outcome)

    with_client(redis_url, "cancel", go, timeout_s)


# -- serve ---------------------------------------------------------------------


@main.command(context_settings=CONTEXT)
@REDIS_OPTION
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8000, show_default=True, help="Port to listen on.")
@click.option(
    "--agents",
    "agents_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSON object of named RunSpec templates for the chat endpoint.",
)
@click.option(
    "--cors-origin", "cors_origins", multiple=True, help="Allow browser apps from this origin."
)
@click.option("--insecure", is_flag=True, help="Serve a non-loopback address without API keys.")
@click.option("--log-level", default="info", show_default=True, help="uvicorn's log level.")
@click.option(
    "--mcp",
    "mcp_gateway",
    is_flag=True,
    help="Also serve the fleet's tools as an MCP server at /mcp.",
)
def serve(
    redis_url: str | None,
    host: str,
    port: int,
    agents_path: str | None,
    cors_origins: Sequence[str],
    insecure: bool,
    log_level: str,
    mcp_gateway: bool,
) -> None:
    """Serve the HTTP API, the AI SDK chat endpoint and the dashboard.

    API keys come from $AGENTQ_API_KEYS (a file of `sha256:HEX TENANT [SCOPES]` and
    `sha256:HEX worker:NAME queue:QUEUE` lines, or the lines inline; see `agentq hash-key`).
    $AGENTQ_TOKEN_SECRET signs short-lived tokens and session cookies (unset: a secret kept
    in Redis, shared by every replica)."""
    from agentq.orchestrator.core.errors import SpecError
    from agentq.orchestrator.tools.remote import load_remote_tools
    from agentq.serve.auth import load_keys
    from agentq.serve.config import ServeConfig, limits_from_env, load_agents
    from agentq.serve.preflight import check_layout
    from agentq.serve.server import refusal
    from agentq.serve.server import serve as run_server

    if not redis_url:
        fail("serve needs --redis URL (or $AGENTQ_REDIS_URL)", EXIT_BAD_INPUT)
    try:
        settings = load_settings().model_copy(update={"redis_url": redis_url})
        remote_tools = load_remote_tools(settings.remote_tools)
        keys = load_keys(os.environ.get("AGENTQ_API_KEYS"))
        agents = load_agents(agents_path)
    except (OSError, ValueError) as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except (CliError, SpecError) as exc:
        fail(exc.message, EXIT_BAD_INPUT)
    try:
        limits = limits_from_env(os.environ)
    except ValueError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    config = ServeConfig(
        redis_url=redis_url,
        agents=agents,
        keys=keys,
        settings=settings,
        remote_tools=remote_tools,
        cors_origins=tuple(cors_origins),
        limits=limits,
        mcp=mcp_gateway,
        host=host,
        token_secret=os.environ.get("AGENTQ_TOKEN_SECRET") or None,
    )
    refused = refusal(config, host, insecure)
    if refused:
        fail(refused, EXIT_BAD_INPUT)
    silent = guarded(check_layout)(redis_url, settings)
    if silent is not None and config.token_secret is None:
        fail(
            f"cannot reach Redis: {silent} (serve reads its token secret there as it starts;"
            " with $AGENTQ_TOKEN_SECRET set it starts before Redis answers)",
            EXIT_INFRASTRUCTURE,
        )
    if silent is not None:
        click.echo(
            f"agentq serve: Redis did not answer ({silent}): the fleet's state layout was not"
            " checked",
            err=True,
        )
    if keys is None:
        click.echo(
            "agentq serve: no API keys configured (AGENTQ_API_KEYS): "
            f"no authentication, serving {host} only",
            err=True,
        )
    click.echo(f"agentq serve: http://{host}:{port}/ (API docs at /docs)", err=True)
    run_server(config, host, port, log_level=log_level)


# -- catalog -------------------------------------------------------------------


@main.group(context_settings=CONTEXT)
def catalog() -> None:
    """What the deployment serves, so that runs are accepted while no worker is up."""


@catalog.command("publish", context_settings=CONTEXT)
@REDIS_OPTION
@TOOLS_OPTION
@mcp_option("The deployment's mcpServers JSON: each server is connected to for its tools.")
@click.option("--sandbox", is_flag=True, help="The deployment runs sandboxed code tools.")
@MODELS_OPTION
@click.option(
    "--queue",
    "tool_queue",
    default="tools",  # the tools queue (core/envelopes.py), written out to keep -h light
    show_default=True,
    help="The queue the function and MCP tools are served on.",
)
@click.option(
    "--workflows",
    "workflows_dir",
    default=None,
    metavar="DIR",
    help="Publish the workflows of DIR (*.json), each by name; a changed one gets a new version.",
)
def catalog_publish(
    redis_url: str | None,
    tool_modules: Sequence[str],
    mcp_config: str | None,
    sandbox: bool,
    models_path: str | None,
    tool_queue: str,
    workflows_dir: str | None,
) -> None:
    """Replace the catalogue with what workers with these options serve (no expiry).

    Each MCP server of --mcp-config is connected to for its tools; one that cannot be
    is an error (exit 3) and the previous catalogue stays. The workflows of --workflows
    are checked first (a bad one: exit 2, nothing published) and add versions: a publish
    never removes one."""

    async def go() -> None:
        from agentq.cli.workflow import read_definitions
        from agentq.orchestrator.core.errors import InfrastructureError
        from agentq.orchestrator.core.settings import Settings
        from agentq.orchestrator.tools.workflow import check_definition
        from agentq.workers.worker.catalog import build_catalog

        definitions = read_definitions(workflows_dir) if workflows_dir else []
        for definition in definitions:
            check_definition(definition)
        entries, failures = await build_catalog(
            tool_modules,
            mcp_config=_mcp_config_path(mcp_config),
            sandbox=sandbox,
            models_path=models_path or Settings().models,
            tool_queue=tool_queue,
        )
        if failures:
            server, why = next(iter(sorted(failures.items())))
            raise InfrastructureError(f"catalog not published: MCP server {server!r}: {why}")
        async with open_client(redis_url, "catalog publish") as client:
            await client.fleet.publish_catalog(entries)
            versions = await client.fleet.publish_workflows(definitions)
        kinds: dict[str, int] = {}
        for entry in entries:
            kinds[entry.kind] = kinds.get(entry.kind, 0) + 1
        summary = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "nothing"
        click.echo(f"catalog published: {summary}", err=True)
        for v in versions:
            state = "new" if v.new else "unchanged"
            click.echo(f"workflow {v.name} version {v.version} ({state})", err=True)

    guarded(go)()


@catalog.command("show", context_settings=CONTEXT)
@REDIS_OPTION
@json_option("Print the entries as JSON.")
def catalog_show(redis_url: str | None, as_json: bool) -> None:
    """The published catalogue, and whether a live worker serves each entry now."""

    async def go(client: Client) -> None:
        entries = await client.fleet.catalog()
        live = await client.fleet.live_tools()
        rows = sorted(entries.items(), key=lambda kv: (kv[1].kind, kv[0]))
        if as_json:
            body = [
                {**e.model_dump(mode="json", exclude={"seen_at"}), "live": key in live}
                for key, e in rows
            ]
            click.echo(json.dumps(body, indent=2))
            return
        if not rows:
            click.echo("the catalogue is empty (agentq catalog publish)", err=True)
        table = [
            (
                e.kind,
                f"{e.server}/{e.name}" if e.server and e.server != e.name else e.name,
                e.queue,
                "live" if key in live else "-",
            )
            for key, e in rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(3)] if table else []
        for row in table:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            click.echo("  ".join([*cells, row[3]]))
        for name, versions in sorted((await client.fleet.workflows()).items()):
            click.echo(f"workflow  {name}  version {max(versions)} (of {len(versions)})")

    with_client(redis_url, "catalog show", go)


@main.command("hash-key", context_settings=CONTEXT)
@click.argument("key")
def hash_key(key: str) -> None:
    """Print the hash of an API key, for an AGENTQ_API_KEYS line."""
    from agentq.serve.auth import hash_key as hashed

    click.echo(hashed(key))


@main.group(context_settings=CONTEXT)
def sandbox() -> None:
    """The code sandbox's container images."""


@sandbox.command("build-images", context_settings=CONTEXT)
@click.option(
    "--mirror",
    default=None,
    metavar="URL",
    help="Debian mirror (default: the machine's apt source).",
)
@click.option("--force", is_flag=True, help="Rebuild even if the images exist.")
@JSON_OPTION
def build_images(mirror: str | None, force: bool, as_json: bool) -> None:
    """Build the sandbox images from the Debian archive alone (no registry needed)."""
    from agentq.cli.render import make_console
    from agentq.cli.sandbox_progress import build_with_progress

    try:
        names = build_with_progress(mirror=mirror, force=force, console=make_console(stderr=True))
    except CliError as exc:
        fail(exc.message, exc.code)
    _echo_json(names) if as_json else click.echo("\n".join(names))


@main.group(context_settings=CONTEXT)
def images() -> None:
    """The deployment's container images (agentq, Redis, Docker engine, trace viewer)."""


@images.command("build", context_settings=CONTEXT)
@click.argument("names", nargs=-1, metavar="[agentq|redis|dind|phoenix|prometheus]...")
@click.option("--mirror", default=None, help="Debian mirror (default: the machine's apt source).")
@click.option("--tag", default=None, help="Tag of the agentq image (default: its version).")
@click.option("--source", default=None, help="Checkout or wheel to install (default: this one).")
@click.option("--force", is_flag=True, help="Rebuild even if the images exist.")
@click.option(
    "--export",
    "export_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Also save the sandbox images here (docker-compose.yml's engine loads them).",
)
def images_build(
    names: Sequence[str],
    mirror: str | None,
    tag: str | None,
    source: str | None,
    force: bool,
    export_dir: str | None,
) -> None:
    """Build images from the Debian archive and PyPI alone (no registry; needs root)."""
    from agentq.cli.images import build_images as build
    from agentq.cli.images import export_sandbox_images
    from agentq.sandbox.images import ImageBuildError

    try:
        built = build(
            names,
            mirror=mirror,
            tag=tag,
            source=source,
            force=force,
            log=lambda line: click.echo(line, err=True),
        )
        saved = export_sandbox_images(Path(export_dir), mirror) if export_dir else None
    except ValueError as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except ImageBuildError as exc:
        fail(str(exc), EXIT_INFRASTRUCTURE)
    for image in built:
        how = "present" if image.skipped else f"built in {image.seconds:.0f} s"
        click.echo(f"{image.name}\t{image.size_bytes / 1e6:.0f} MB\t{how}")
    if saved is not None:
        click.echo(f"sandbox images saved to {saved}")


# -- commands of their own modules ---------------------------------------------

from agentq.cli.workflow import workflow  # noqa: E402

main.add_command(workflow)
# -- fork and replay (agentq/cli/loops.py) ---------------------------------------

from agentq.cli.loops import fork_command, replay_command  # noqa: E402

main.add_command(fork_command)
main.add_command(replay_command)

# Commands in their own modules (they read this module's helpers when they run).
from agentq.cli.call import call as _call_command  # noqa: E402

main.add_command(_call_command)

# -- batch (agentq/cli/batch.py) -------------------------------------------------

from agentq.cli.batch import batch  # noqa: E402  (after main: the module extends it)

main.add_command(batch)

# -- thread (agentq/cli/thread.py) -----------------------------------------------

from agentq.cli.thread import thread  # noqa: E402

main.add_command(thread)

# -- schedule (agentq/cli/schedule.py) ----------------------------------------------

from agentq.cli.schedule import schedule  # noqa: E402

main.add_command(schedule)

# -- budget (agentq/cli/budget.py) ------------------------------------------------

from agentq.cli.budget import budget  # noqa: E402

main.add_command(budget)
