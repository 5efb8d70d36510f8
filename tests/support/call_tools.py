"""Tools the tool-call front doors are tested with (`agentq worker --tools` this file):
progress, media, a slow one to cancel, and the tools the MCP conformance suite's server
scenarios call by name."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agentq.workers.tools.function_tools import tool

# A 1x1 PNG, base64.
TINY_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6"
    "kgAAAABJRU5ErkJggg=="
)


@tool
async def count_up(n: int) -> AsyncIterator[Any]:
    """Reports 1..n as progress, then returns n."""
    for i in range(1, n + 1):
        yield {"progress": i, "total": n}
    yield {"counted": n}


@tool
async def gated(gate: str, wait_s: float = 20.0) -> AsyncIterator[str]:
    """Reports "first", then returns "second" once the file `gate` exists (or "gave up"
    after `wait_s`): a test creates it when it has seen the first progress."""
    yield "first"
    give_up_at = time.monotonic() + wait_s
    while not await asyncio.to_thread(Path(gate).exists):
        if time.monotonic() >= give_up_at:
            yield "gave up"
            return
        await asyncio.sleep(0.01)
    yield "second"


@tool
def tiny_image() -> dict[str, Any]:
    """Returns a 1x1 PNG."""
    return {"content": [{"type": "media", "media_type": "image/png", "data": TINY_PNG}]}


@tool
async def linger(seconds: float) -> str:
    """Sleeps `seconds`, then says so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds:g} s"


@tool
def echo(text: str) -> str:
    """Returns its input text."""
    return text
