"""Tools the integration and end-to-end tests load into `agentq worker --tools`."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from agentq import ToolContext, tool


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


@tool
def mark_and_sleep(marker: str, seconds: float) -> dict[str, int]:
    """Append this worker's pid to the marker file, then sleep (a call to kill a worker in)."""
    with Path(marker).open("a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return {"pid": os.getpid()}


@tool
def mark_delivery(marker: str, ctx: ToolContext) -> dict[str, Any]:
    """Append this delivery (pid, attempt, idempotency key) to the marker file; the first
    then works until it is cancelled or times out (a call to kill a worker in)."""
    with Path(marker).open("a") as f:
        f.write(f"{os.getpid()} {ctx.attempt} {ctx.idempotency_key}\n")
    while ctx.attempt == 1 and not ctx.cancelled:
        time.sleep(0.05)
    return {"attempt": ctx.attempt, "idempotency_key": ctx.idempotency_key}


@tool
def fail(message: str) -> str:
    """Raise an error with the given message."""
    raise RuntimeError(message)


@tool
def die() -> str:
    """Kill this worker process (a poison call)."""
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@tool
async def block_loop(marker: str, seconds: float) -> dict[str, int]:
    """Append this worker's pid to the marker file, then block the event loop (a badly
    written async tool: nothing else of the worker's loop runs meanwhile)."""
    with Path(marker).open("a") as f:  # noqa: ASYNC230 (blocking is the point)
        f.write(f"{os.getpid()}\n")
    time.sleep(seconds)  # noqa: ASYNC251 (blocking is the point)
    return {"pid": os.getpid()}


@tool
async def nap(seconds: float, tag: str) -> str:
    """Sleep without blocking, then echo the tag (a call that is in flight for a while)."""
    import asyncio

    await asyncio.sleep(seconds)
    return tag


@tool
def log_warning(message: str) -> str:
    """Log a warning from inside a job (for the worker's log lines)."""
    import logging

    logging.getLogger("agentq.tests.tools").warning("tool says: %s", message)
    return "logged"


@tool
async def hold_until(started: str, gate: str) -> str:
    """Create `started`, then wait until `gate` exists (a call a test holds in flight
    while it does something behind the run's back)."""
    import asyncio

    Path(started).touch()  # noqa: ASYNC240 (a test's marker file)
    for _ in range(30_000):  # at most ~5 minutes: a test that forgot the gate fails
        if Path(gate).exists():  # noqa: ASYNC240
            return "released"
        await asyncio.sleep(0.01)
    raise TimeoutError("the gate was never opened")


@tool
async def log_and_hold(marker: str, tag: str, gate: str) -> str:
    """Append `tag` to the marker file as the call starts, then wait until `gate` exists
    (the marker's lines are the order in which the claim took the calls)."""
    import asyncio

    with Path(marker).open("a") as f:  # noqa: ASYNC230 (a test's marker file)
        f.write(f"{tag}\n")
    for _ in range(30_000):  # at most ~5 minutes: a test that forgot the gate fails
        if Path(gate).exists():  # noqa: ASYNC240
            return tag
        await asyncio.sleep(0.01)
    raise TimeoutError("the gate was never opened")


@tool
async def ask_name(greeting: str, ctx: ToolContext) -> str:
    """Ask whoever drives the run for a name (an input request, as an MCP elicitation
    is forwarded), then greet it."""
    assert ctx.elicit is not None, "a call in a run can ask"
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = await ctx.elicit("What is your name?", schema)
    return f"{greeting}, {answer['name'] if answer else 'nobody'}"


@tool
async def enter_hold_leave(marker: str, tag: str, gate: str) -> str:
    """Append `+tag` to the marker file as the call starts, wait until `gate` exists, then
    append `-tag` (the marker's lines show which calls ran at the same time, in order)."""
    import asyncio

    with Path(marker).open("a") as f:  # noqa: ASYNC230 (a test's marker file)
        f.write(f"+{tag}\n")
    for _ in range(30_000):  # at most ~5 minutes: a test that forgot the gate fails
        if Path(gate).exists():  # noqa: ASYNC240
            with Path(marker).open("a") as f:  # noqa: ASYNC230
                f.write(f"-{tag}\n")
            return tag
        await asyncio.sleep(0.01)
    raise TimeoutError("the gate was never opened")
