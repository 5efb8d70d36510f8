"""Tools for the quickstart (`agentq run examples/quickstart.json --tools THIS_FILE`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from agentq import tool


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
async def weather(city: str) -> dict[str, object]:
    """Current weather for a city (a fixed answer: this is a demo)."""
    await asyncio.sleep(0.05)
    return {"city": city, "temperature_c": 21, "sky": "clear"}


@tool
async def countdown(n: int = 3) -> AsyncIterator[str]:
    """Count down from n, reporting progress; the last value is also the result."""
    for i in range(n, 0, -1):
        yield f"{i}..."
        await asyncio.sleep(0.02)
    yield "liftoff"
