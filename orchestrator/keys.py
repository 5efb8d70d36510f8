"""Redis key names: declared in `agentq.orchestrator.state.keys`, re-exported here for
the callers that import them from their old place."""

from agentq.orchestrator.state.keys import (
    CATALOG,
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
    "CATALOG",
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
