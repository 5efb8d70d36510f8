"""Once a run has ended, wherever it ended (a worker's job, a client's cancel, a posted
result): its span is recorded and its store's listeners (the process's metrics) hear
how it ended. Each is told once: only the transition that ended the run calls this."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from agentq.orchestrator import tracing
from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.orchestrator.runs.state import MetaField
from agentq.orchestrator.runs.store import RunStore

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

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


# Runs last from a scripted step (milliseconds) to agents that work for hours.
_RUN_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400)


class EndedRuns:
    """A listener counting ended runs, `agentq_runs_ended_total{tenant, status,
    failure_kind}`, and timing them from creation to end,
    `agentq_run_duration_seconds{tenant, status}`, into a process's registry (a
    worker's and `agentq serve`'s)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # Imported here: only a process that serves metrics counts (a CLI command never).
        from prometheus_client import Counter, Histogram

        self.counter = Counter(
            "agentq_runs_ended",
            "Runs ended in this process, by tenant, final status and failure kind.",
            ["tenant", "status", "failure_kind"],
            registry=registry,
        )
        self.duration = Histogram(
            "agentq_run_duration_seconds",
            "From a run's creation to its end (a delayed run's wait included).",
            ["tenant", "status"],
            buckets=_RUN_BUCKETS_S,
            registry=registry,
        )

    def __call__(self, run_id: str, meta: Mapping[str, str]) -> None:
        failure = json.loads(meta.get(MetaField.ERROR) or "{}")
        tenant = meta.get("tenant", DEFAULT_TENANT)
        status = meta.get(MetaField.STATUS, "")
        self.counter.labels(tenant, status, str(failure.get("type", ""))).inc()
        created, finished = meta.get(MetaField.CREATED_AT), meta.get(MetaField.FINISHED_AT)
        if created and finished:
            self.duration.labels(tenant, status).observe(max(0.0, float(finished) - float(created)))
