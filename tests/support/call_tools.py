"""Tools the tool-call front doors are tested with (`agentq worker --tools` this file):
progress, media, a slow one to cancel, and the tools the MCP conformance suite's server
scenarios call by name."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
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
