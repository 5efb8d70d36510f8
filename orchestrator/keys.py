"""Redis key names of a run. One place, so the Lua transitions and readers agree."""

from __future__ import annotations

REGISTRY = "aq:registry"  # hash: registry key -> ToolAnnouncement JSON
RUN_ENDED = "aq:run-ended"  # pub/sub: the id of every run that ends (see prelude.lua)


def meta(run_id: str) -> str:
    return f"aq:run:{run_id}"


def messages(run_id: str) -> str:
    return f"aq:run:{run_id}:msgs"


def events(run_id: str) -> str:
    return f"aq:run:{run_id}:events"


def tools(run_id: str) -> str:
    return f"aq:run:{run_id}:tools"


def step(run_id: str, n: int) -> str:
    return f"aq:run:{run_id}:s:{n}"


def answer(run_id: str, request_id: str) -> str:
    """A list the answer to an input request (elicitation) is pushed to."""
    return f"aq:run:{run_id}:answer:{request_id}"


def run_keys(run_id: str) -> list[str]:
    """The KEYS every run transition declares."""
    return [meta(run_id), messages(run_id), events(run_id)]
