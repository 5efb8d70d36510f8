"""Once a run has ended, wherever it ended (a worker's job, a client's cancel, a posted
result): its span is recorded and its store's listeners (the process's metrics) hear
how it ended. Each is told once: only the transition that ended the run calls this."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from agentq.orchestrator import tracing
from agentq.orchestrator.runs.store import RunStore

log = logging.getLogger("agentq")

# Told a run's id and its meta (status, error, tenant…) once it has ended.
RunEndListener = Callable[[str, Mapping[str, str]], None]


async def run_ended(store: RunStore, run_id: str) -> None:
    """Record the run's span and tell the store's listeners. Neither ever fails the job
    or request that ended the run: the run has ended either way."""
    if not (tracing.recording() or store.end_listeners):
        return
    try:
        meta = await store.meta(run_id)
    except Exception as exc:
        log.warning("could not read how run %s ended: %s", run_id, exc)
        return
    if tracing.recording():
        try:
            tracing.record_run(run_id, meta)
        except Exception as exc:
            log.warning("could not record the span of run %s: %s", run_id, exc)
    for listener in store.end_listeners:
        listener(run_id, meta)
