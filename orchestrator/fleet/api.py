"""The fleet through `Client` (`client.fleet`): the workers alive, the tools they
serve (announced, or published in the deployment's catalogue), the workflows it
publishes, their queues' depths.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from pydantic import BaseModel
from redis.asyncio import Redis

from agentq.orchestrator.core.envelopes import MODEL_QUEUE, TOOLS_QUEUE
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.fleet import listings
from agentq.orchestrator.fleet.listings import WorkerRecord
from agentq.orchestrator.fleet.queues import QueueStats, known_queues, queue_stats
from agentq.orchestrator.redis.faults import maps_redis_errors
from agentq.orchestrator.runs.published_workflows import PublishedVersion, WorkflowCatalogue
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.tools.announcements import live_registry
from agentq.orchestrator.tools.base import ToolAnnouncement
from agentq.orchestrator.tools.workflow import check_definition
from agentq.orchestrator.tools.workflow_catalogue import PublishedWorkflows, WorkflowDefinition


class FleetStatus(BaseModel):
    """How many workers are alive, which, and the depth of each queue they serve (and
    the model queue's)."""

    workers: int
    worker_ids: list[str]
    queues: dict[str, int]


class Fleet:
    """The fleet's operations of one Client."""

    def __init__(self, redis: Redis, store: RunStore) -> None:
        self.redis = redis
        self.store = store
        self._workflows = WorkflowCatalogue(redis)

    # -- workers and queues ------------------------------------------------------

    @maps_redis_errors
    async def workers(self) -> list[WorkerRecord]:
        """Workers that announced themselves recently."""
        return await listings.live_workers(self.redis)

    @maps_redis_errors
    async def status(self) -> FleetStatus:
        workers = await listings.live_workers(self.redis)
        queues = {MODEL_QUEUE}
        for worker in workers:
            queues.update(worker.queues)
        stats = await queue_stats(self.redis, sorted(queues))
        return FleetStatus(
            workers=len(workers),
            worker_ids=sorted(w.id for w in workers),
            queues={q: s.depth for q, s in stats.items()},
        )

    @maps_redis_errors
    async def queues(self, also: Iterable[str] = ()) -> dict[str, QueueStats]:
        """Every queue the deployment serves (the model and tools queues, those of every
        tool it resolves), every queue holding a job now, and `also`: each at 0 when
        empty."""
        served = {a.queue for a in (await self.store.registry()).values()}
        names = {MODEL_QUEUE, TOOLS_QUEUE, *served, *also, *await known_queues(self.redis)}
        return await queue_stats(self.redis, sorted(names))

    # -- the tools served --------------------------------------------------------

    async def announce(self, announcements: Sequence[ToolAnnouncement]) -> None:
        """Publish (refresh) tools served from this process (`agentq serve`'s remote
        tools); they stay resolvable while they are announced again within the TTL."""
        await self.store.announce(announcements)

    async def publish_catalog(self, entries: Sequence[ToolAnnouncement]) -> None:
        """Replace the deployment's catalogue (what it serves whether or not a worker
        is up), whole."""
        await self.store.publish_catalog(entries)

    @maps_redis_errors
    async def catalog(self) -> dict[str, ToolAnnouncement]:
        """The published catalogue, by registry key."""
        return await self.store.catalog()

    async def publish_workflows(
        self, definitions: Sequence[WorkflowDefinition]
    ) -> list[PublishedVersion]:
        """Publish workflows by name: each whose definition changed becomes its next
        version (the older ones stay, for runs that resolved them and specs that pin
        them). All are checked before any is written (a SpecError naming the workflow
        and its bad node or edge)."""
        names = [d.name for d in definitions]
        for definition in definitions:
            if names.count(definition.name) > 1:
                raise SpecError(f"workflow {definition.name!r} is given twice")
            check_definition(definition)
        return await self._workflows.publish(definitions)

    async def workflows(self) -> PublishedWorkflows:
        """Every version of every published workflow, by name."""
        return await self._workflows.read()

    @maps_redis_errors
    async def live_tools(self) -> dict[str, ToolAnnouncement]:
        """What workers alive now announce, by registry key."""
        return live_registry(await self.store.announced(), time.time())
