"""A tool announced by a worker started later (tools/list_changed through the gateway)."""

from __future__ import annotations

from agentq.workers.tools.function_tools import tool


@tool
def late_arrival() -> str:
    """Served only by the worker that came later."""
    return "late"
