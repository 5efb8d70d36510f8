"""The `agentq` command line.

Exit codes: 0 the run succeeded (or the command did its job), 1 the run
failed or was cancelled, 2 a bad spec or bad arguments, 3 infrastructure
(Redis unreachable, …).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from pydantic import ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from rich.console import Console

from agentq.orchestrator.client import Client
from agentq.orchestrator.endpoints import EndpointPolicy
from agentq.orchestrator.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.errors import AgentqError, InfrastructureError, RunError, SpecError
from agentq.orchestrator.redis_faults import describe
from agentq.orchestrator.result import RunResult
from agentq.orchestrator.settings import Settings
from agentq.orchestrator.spec import RunSpec
from agentq.render import ProgressPrinter

if TYPE_CHECKING:
    from agentq.workers.metrics import WorkerMetrics
    from agentq.workers.runtime import WorkerRuntime

T = TypeVar("T")

REDIS_OPTION = click.option(
    "--redis",
    "redis_url",
    envvar="AGENTQ_REDIS_URL",
    default=None,
    help="Redis URL (default: $AGENTQ_REDIS_URL).",
)


MODELS_OPTION = click.option(
    "--models",
    "models_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Models file: the model endpoints specs may use (default: $AGENTQ_MODELS).",
)


TOOLS_OPTION = click.option(
    "--tools",
    "tool_modules",
    multiple=True,
    help="Module or .py file of @tool functions, or of plugins (tool kinds, providers).",
)


def _settings(models_path: str | None) -> Settings:
    """The environment's settings, with the command's --models over $AGENTQ_MODELS."""
    settings = Settings()
    if models_path is not None:
        settings = settings.model_copy(update={"models": models_path})
    return settings


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"agentq: {message}", err=True)
    sys.exit(code)


def _spec_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "spec"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"invalid spec: {where}: {message}{more}"


TIMEOUT_OPTION = click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=None,
    help="Give up after S seconds, whatever Redis does (exit 3).",
)


async def _within(timeout_s: float | None, work: Coroutine[Any, Any, T]) -> T:
    """The whole command, connecting included, bounded by --timeout."""
    if timeout_s is None:
        return await work
    try:
        return await asyncio.wait_for(work, timeout_s)
    except TimeoutError:
        raise InfrastructureError(
            f"gave up after {timeout_s:g} s (--timeout): Redis did not answer in time"
        ) from None


def _guard(
    fn: Callable[..., Coroutine[Any, Any, T]], timeout_s: float | None = None
) -> Callable[..., T]:
    """Run an async command, mapping our errors to one line and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return asyncio.run(_within(timeout_s, fn(*args, **kwargs)))
        except ValidationError as exc:
            _fail(_spec_error(exc), 2)
        except SpecError as exc:
            _fail(exc.message, 2)
        except RunError as exc:
            _fail(exc.message, 1)
        except (RedisConnectionError, OSError) as exc:
            _fail(f"cannot reach Redis: {exc}", 3)
        except RedisError as exc:
            _fail(f"Redis error: {describe(exc)}", 3)
        except AgentqError as exc:
            _fail(exc.message, 3)
        except KeyboardInterrupt:
            _fail("interrupted", 130)

    return wrapper


def _read_spec(path: str) -> RunSpec:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read spec {path!r}: {exc.strerror}") from None
    try:
        return RunSpec.model_validate_json(text)
    except ValidationError as exc:
        if exc.errors()[0]["type"] == "json_invalid":
            raise SpecError(f"spec {path!r} is not valid JSON: {exc.errors()[0]['msg']}") from None
        raise


def _print_result(result: RunResult) -> None:
    click.echo(result.model_dump_json(indent=2))


def _exit_for(result: RunResult) -> None:
    sys.exit(0 if result.succeeded else 1)


@click.group()
@click.version_option(package_name="agentq")
def main() -> None:
    """Run LLM agent loops as durable distributed jobs on Redis."""


# -- run ---------------------------------------------------------------------


@main.command()
@click.argument("spec_path", metavar="SPEC")
@REDIS_OPTION
@TOOLS_OPTION
@click.option("--mcp-config", type=click.Path(exists=True, dir_okay=False), default=None)
@MODELS_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print only the RunResult as JSON.")
@click.option("--timeout", "timeout_s", type=float, default=None, help="Give up after S seconds.")
def run(
    spec_path: str,
    redis_url: str | None,
    tool_modules: Sequence[str],
    mcp_config: str | None,
    models_path: str | None,
    as_json: bool,
    timeout_s: float | None,
) -> None:
    """Run SPEC and show its progress. Embedded (in-memory) unless --redis is given."""
    result = _guard(_run)(
        spec_path, redis_url, tool_modules, mcp_config, models_path, as_json, timeout_s
    )
    _exit_for(result)


async def _run(
    spec_path: str,
    redis_url: str | None,
    tool_modules: Sequence[str],
    mcp_config: str | None,
    models_path: str | None,
    as_json: bool,
    timeout_s: float | None,
) -> RunResult:
    from agentq.orchestrator import tracing
    from agentq.workers.embedded import embedded
    from agentq.workers.executors.assemble import optional_executors
    from agentq.workers.loading import load_tool_modules

    tracing.setup_tracing("agentq")
    # Tool modules first: one may register a tool kind or a provider the spec uses.
    tools = load_tool_modules(tool_modules)
    spec = _read_spec(spec_path)
    settings = _settings(models_path)
    executors = await optional_executors(mcp_config=_mcp_config_path(mcp_config), sandbox=False)
    console = Console(stderr=as_json, quiet=as_json, highlight=False)
    if redis_url and not tool_modules and not executors:
        async with Client(redis_url, settings=settings) as client:
            return await _drive(client, spec, console, as_json, timeout_s)
    async with embedded(
        tools=tools, executors=executors, redis_url=redis_url, settings=settings
    ) as client:
        return await _drive(client, spec, console, as_json, timeout_s)


async def _drive(
    client: Client, spec: RunSpec, console: Console, as_json: bool, timeout_s: float | None
) -> RunResult:
    run_id = await client.submit(spec)
    printer = ProgressPrinter(console)
    interactive = sys.stdin.isatty() and not as_json

    async def follow() -> None:
        async for event in client.events(run_id, follow=True):
            printer.show(event)
            if interactive and event.type == "tool-approval-request":
                await _ask_approval(client, run_id, event.tool_call_id or "", console)
            elif event.type in ("tool-approval-request", "tool-call") and not interactive:
                pass

    try:
        await asyncio.wait_for(follow(), timeout_s)
    except TimeoutError:
        await client.cancel(run_id, reason="timed out")
    result = await client.wait(run_id)
    if as_json:
        _print_result(result)
    else:
        printer.summary(result)
    return result


async def _ask_approval(client: Client, run_id: str, call_id: str, console: Console) -> None:
    answer = await asyncio.to_thread(console.input, "  approve this call? [y/N] ")
    approved = answer.strip().lower() in ("y", "yes")
    reason = None if approved else (await asyncio.to_thread(console.input, "  reason: ")) or None
    await client.approve(run_id, call_id, approved=approved, reason=reason)


# -- worker ------------------------------------------------------------------


@main.command()
@REDIS_OPTION
@TOOLS_OPTION
@click.option("--queue", "queues", multiple=True, help="Queues to serve (default: model, tools).")
@click.option("--concurrency", type=int, default=None, help="Jobs at once per queue.")
@click.option("--mcp-config", type=click.Path(exists=True, dir_okay=False), default=None)
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
@click.option("--metrics-port", type=int, default=None, help="Serve Prometheus /metrics here.")
@click.option("--health-port", type=int, default=None, help="Serve /livez and /readyz here.")
@click.option(
    "--probe-host", default="0.0.0.0", show_default=True, help="Address the two ports bind."
)
@click.option("-v", "--verbose", is_flag=True)
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
    if not redis_url:
        _fail("worker needs --redis URL (or $AGENTQ_REDIS_URL)", 2)
    probes = _Probes(metrics_port, health_port, probe_host)
    _guard(_worker)(
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
    redis_url: str,
    tool_modules: Sequence[str],
    queues: Sequence[str],
    concurrency: int | None,
    mcp_config: str | None,
    sandbox: bool,
    models_path: str | None,
    probes: _Probes,
    drain_timeout_s: float | None,
) -> None:
    from agentq.orchestrator import tracing
    from agentq.workers.executors.assemble import optional_executors
    from agentq.workers.executors.function import FunctionExecutor
    from agentq.workers.loading import load_tool_modules
    from agentq.workers.runtime import WorkerRuntime

    tracing.setup_tracing("agentq-worker")
    settings = _settings(models_path)
    # Read the models file now: a bad one stops the worker at start, not at its first call.
    EndpointPolicy.from_settings(settings)
    if concurrency is not None:
        settings = settings.model_copy(update={"concurrency": concurrency})
    if drain_timeout_s is not None:
        settings = settings.model_copy(update={"drain_timeout_s": drain_timeout_s})
    tools = load_tool_modules(tool_modules)
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
            redis_url=redis_url,
        ),
    ]
    # A worker given no tool modules (functions or kinds) and no MCP servers does not take
    # the tools queue's jobs.
    serves_tools = bool(tool_modules) or _mcp_config_path(mcp_config) is not None
    served = list(queues) or (
        [MODEL_QUEUE] + ([TOOLS_QUEUE] if serves_tools else []) + (["sandbox"] if sandbox else [])
    )
    tool_queue = next((q for q in served if q != MODEL_QUEUE), TOOLS_QUEUE)
    runtime = WorkerRuntime(
        redis_url,
        executors=executors,
        queues=served,
        tool_queue=tool_queue,
        settings=settings,
        metrics=probes.metrics(),
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
    click.echo(
        f"agentq worker {runtime.worker_id}: queues {', '.join(served)}; "
        f"tools {', '.join(t.name for t in tools) or '-'}",
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
            from agentq.workers.metrics import WorkerMetrics

            self._metrics = WorkerMetrics()
        return self._metrics

    def serve(self, runtime: WorkerRuntime) -> Callable[[], None]:
        """Start the servers; return what stops them. A taken port is the user's to fix."""
        from agentq.workers.health import HealthServer, readiness_check

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
            for stop in stops:
                stop()
            raise SpecError(f"cannot serve probes on {self.host}: {exc.strerror}") from None

        def stop_all() -> None:
            for stop in stops:
                stop()

        return stop_all


# -- client commands -----------------------------------------------------------


def _mcp_config_path(flag: str | None) -> str | None:
    return flag or os.environ.get("AGENTQ_MCP_CONFIG") or None


def _client(redis_url: str | None, settings: Settings | None = None) -> Client:
    if not redis_url:
        _fail("needs --redis URL (or $AGENTQ_REDIS_URL)", 2)
    return Client(redis_url, settings=settings)


@main.command()
@click.argument("spec_path", metavar="SPEC")
@REDIS_OPTION
@TIMEOUT_OPTION
@MODELS_OPTION
def submit(
    spec_path: str, redis_url: str | None, timeout_s: float | None, models_path: str | None
) -> None:
    """Submit SPEC and print the run id."""

    async def go() -> None:
        spec = _read_spec(spec_path)
        async with _client(redis_url, _settings(models_path)) as client:
            click.echo(await client.submit(spec))

    _guard(go, timeout_s)()


@main.command()
@click.argument("run_id")
@REDIS_OPTION
@click.option("--timeout", "timeout_s", type=float, default=None)
def wait(run_id: str, redis_url: str | None, timeout_s: float | None) -> None:
    """Wait for RUN_ID to end and print its RunResult. Exit 0 iff it succeeded."""

    async def go() -> RunResult:
        async with _client(redis_url) as client:
            return await client.wait(run_id, timeout_s=timeout_s)

    # The client's own timeout says "the run did not finish" (exit 1); this outer one
    # only catches what lies outside it (connecting, closing) a moment later.
    result = _guard(go, None if timeout_s is None else timeout_s + 1.0)()
    _print_result(result)
    _exit_for(result)


@main.command()
@click.argument("run_id")
@REDIS_OPTION
@click.option("--after", type=int, default=None, help="Only events after this seq.")
@click.option("--follow", is_flag=True, help="Keep printing until the run ends.")
@TIMEOUT_OPTION
def events(
    run_id: str, redis_url: str | None, after: int | None, follow: bool, timeout_s: float | None
) -> None:
    """Print the run's events as JSON lines."""

    async def go() -> None:
        async with _client(redis_url) as client:
            await client.store.meta(run_id)  # a clear error for an unknown run
            async for event in client.events(run_id, after=after, follow=follow):
                click.echo(event.model_dump_json(exclude_none=True))

    _guard(go, timeout_s)()


@main.command()
@click.argument("run_id")
@click.argument("call_id")
@REDIS_OPTION
@click.option("--deny", is_flag=True, help="Deny the call instead of approving it.")
@click.option("--reason", default=None, help="Why (shown to the model on a denial).")
@TIMEOUT_OPTION
def approve(
    run_id: str,
    call_id: str,
    redis_url: str | None,
    deny: bool,
    reason: str | None,
    timeout_s: float | None,
) -> None:
    """Approve (or --deny) a call that waits for approval."""

    async def go() -> None:
        async with _client(redis_url) as client:
            await client.approve(run_id, call_id, approved=not deny, reason=reason)

    _guard(go, timeout_s)()


@main.command("tool-result")
@click.argument("run_id")
@click.argument("call_id")
@REDIS_OPTION
@click.option("--output", "output_json", required=True, help="The result, as JSON.")
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
    """Post the result of a call that waits for one (a client tool)."""
    try:
        output = json.loads(output_json)
    except ValueError as exc:
        _fail(f"--output is not valid JSON: {exc}", 2)

    async def go() -> None:
        async with _client(redis_url) as client:
            await client.submit_tool_result(run_id, call_id, output, is_error=is_error)

    _guard(go, timeout_s)()


@main.command()
@click.argument("run_id")
@click.argument("request_id")
@REDIS_OPTION
@click.option("--json", "answer_json", default=None, help="The answer, a JSON object.")
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
    """Answer a call's input request (an MCP server's elicitation), or --decline it."""
    if decline == (answer_json is not None):
        _fail("give either --json ANSWER or --decline", 2)
    content: dict[str, Any] | None = None
    if answer_json is not None:
        try:
            content = json.loads(answer_json)
        except ValueError as exc:
            _fail(f"--json is not valid JSON: {exc}", 2)
        if not isinstance(content, dict):
            _fail("--json must be a JSON object", 2)

    async def go() -> None:
        async with _client(redis_url) as client:
            await client.answer(run_id, request_id, content)

    _guard(go, timeout_s)()


@main.command()
@click.argument("run_id")
@REDIS_OPTION
@click.option("--reason", default=None)
@TIMEOUT_OPTION
def cancel(run_id: str, redis_url: str | None, reason: str | None, timeout_s: float | None) -> None:
    """Cancel a run."""

    async def go() -> None:
        async with _client(redis_url) as client:
            click.echo(await client.cancel(run_id, reason=reason))

    _guard(go, timeout_s)()


# -- serve ---------------------------------------------------------------------


@main.command()
@REDIS_OPTION
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
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
@click.option("--log-level", default="info", show_default=True)
def serve(
    redis_url: str | None,
    host: str,
    port: int,
    agents_path: str | None,
    cors_origins: Sequence[str],
    insecure: bool,
    log_level: str,
) -> None:
    """Serve the HTTP API, the AI SDK chat endpoint and the dashboard.

    API keys come from $AGENTQ_API_KEYS (a file of `sha256:HEX TENANT [SCOPES]` lines,
    or the lines inline; see `agentq hash-key`)."""
    from agentq.serve.auth import load_keys
    from agentq.serve.config import Limits, ServeConfig, load_agents
    from agentq.serve.server import refusal
    from agentq.serve.server import serve as run_server

    if not redis_url:
        _fail("serve needs --redis URL (or $AGENTQ_REDIS_URL)", 2)
    try:
        keys = load_keys(os.environ.get("AGENTQ_API_KEYS"))
        agents = load_agents(agents_path)
    except (OSError, ValueError) as exc:
        _fail(str(exc), 2)
    overrides: dict[str, Any] = {
        name: kind(os.environ[f"AGENTQ_SERVE_{name.upper()}"])
        for name, kind in (
            ("max_body_bytes", int),
            ("max_spec_bytes", int),
            ("submits_per_minute", int),
            ("events_per_second", float),
            ("heartbeat_s", float),
        )
        if f"AGENTQ_SERVE_{name.upper()}" in os.environ
    }
    limits = Limits(**overrides)
    config = ServeConfig(
        redis_url=redis_url,
        agents=agents,
        keys=keys,
        cors_origins=tuple(cors_origins),
        limits=limits,
    )
    refused = refusal(config, host, insecure)
    if refused:
        _fail(refused, 2)
    if keys is None:
        click.echo(
            "agentq serve: no API keys configured (AGENTQ_API_KEYS): "
            f"no authentication, serving {host} only",
            err=True,
        )
    click.echo(f"agentq serve: http://{host}:{port}/ (API docs at /docs)", err=True)
    run_server(config, host, port, log_level=log_level)


@main.command("hash-key")
@click.argument("key")
def hash_key(key: str) -> None:
    """Print the hash of an API key, for an AGENTQ_API_KEYS line."""
    from agentq.serve.auth import hash_key as hashed

    click.echo(hashed(key))


@main.group()
def sandbox() -> None:
    """The code sandbox's container images."""


@sandbox.command("build-images")
@click.option("--mirror", default=None, help="Debian mirror (default: the machine's apt source).")
@click.option("--force", is_flag=True, help="Rebuild even if the images exist.")
def build_images(mirror: str | None, force: bool) -> None:
    """Build the sandbox images from the Debian archive alone (no registry needed)."""
    try:
        from agentq.sandbox.images import build_images as build
    except ImportError as exc:
        _fail(f"sandbox support is not available: {exc}", 3)
    for name in build(mirror=mirror, force=force):
        click.echo(name)


@main.group()
def images() -> None:
    """The deployment's container images (agentq, Redis, Docker engine, trace viewer)."""


@images.command("build")
@click.argument("names", nargs=-1, metavar="[agentq|redis|dind|phoenix]...")
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
    from agentq.images import build_images as build
    from agentq.images import export_sandbox_images
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
        _fail(str(exc), 2)
    except ImageBuildError as exc:
        _fail(str(exc), 3)
    for image in built:
        how = "present" if image.skipped else f"built in {image.seconds:.0f} s"
        click.echo(f"{image.name}\t{image.size_bytes / 1e6:.0f} MB\t{how}")
    if saved is not None:
        click.echo(f"sandbox images saved to {saved}")
