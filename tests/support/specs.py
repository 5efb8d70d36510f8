"""Run-spec builders shared by every test tier: a scripted model's spec and its steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def scripted(
    *steps: dict[str, Any], tools: Sequence[str | dict[str, Any]] = (), **extra: Any
) -> dict[str, Any]:
    """A run spec for the scripted model; a tool given by name is a function tool."""
    return {
        "model": {"provider": "scripted", "script": list(steps)},
        "prompt": "go",
        "tools": [{"type": "function", "name": t} if isinstance(t, str) else t for t in tools],
        **extra,
    }


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A scripted step that calls tools."""
    return {"tool_calls": [{"name": n, "input": i} for n, i in pairs]}


def parked_spec() -> dict[str, Any]:
    """A run whose first step parks two calls: `add` awaits approval (call id c1) and the
    client tool `ask_user` awaits an outside result (c2); the second step answers "done"."""
    return scripted(
        {
            "tool_calls": [
                {"name": "add", "input": {"a": 1, "b": 2}, "id": "c1"},
                {"name": "ask_user", "input": {"q": "name?"}, "id": "c2"},
            ]
        },
        {"text": "done"},
        tools=[
            {"type": "function", "name": "add", "needs_approval": True},
            {"type": "client", "name": "ask_user"},
        ],
    )
