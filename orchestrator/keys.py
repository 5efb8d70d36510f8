"""Redis key names: moved to `agentq.orchestrator.state.keys` (re-exported here)."""

from agentq.orchestrator.state.keys import *  # noqa: F403
from agentq.orchestrator.state.keys import (
    REGISTRY,
    RUN_ENDED,
    answer,
    events,
    messages,
    meta,
    run_keys,
    step,
    tools,
)

__all__ = [
    "REGISTRY",
    "RUN_ENDED",
    "answer",
    "events",
    "messages",
    "meta",
    "run_keys",
    "step",
    "tools",
]
