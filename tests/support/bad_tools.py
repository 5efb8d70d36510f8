"""Tools whose outputs no JSON store takes as they are (the bad-outputs fault scenario)."""

from __future__ import annotations

from typing import Any

from agentq import tool


class Gadget:
    def __repr__(self) -> str:
        return "Gadget()"


@tool
def raw_bytes() -> Any:
    """Bytes that are not UTF-8."""
    return b"\xff\xfe\x00binary"


@tool
def deep() -> Any:
    """A result nested 250 levels deep."""
    value: Any = "bottom"
    for _ in range(250):
        value = [value]
    return value


@tool
def huge(mb: int = 50) -> Any:
    """A result of `mb` megabytes."""
    return "x" * (mb * 1_000_000)


@tool
def not_a_number() -> Any:
    """NaN and infinities."""
    return {"nan": float("nan"), "inf": float("inf"), "list": [float("-inf")]}


@tool
def objects() -> Any:
    """Objects JSON has no form for."""
    return {"gadget": Gadget(), "set": {1}, "tuple_key": {(1, 2): "a"}}


@tool
async def bad_progress() -> Any:
    """Progress values that are bytes, then a fine result."""
    yield b"\xff"
    yield "ok"
