"""The published workflows in Redis: publishing a version, reading them for submit.

One hash holds them all (`keys.WORKFLOWS`), so a publish is one script on one key (a
changed definition gets the next version atomically, however many publishers race) and
a submit reads them in one round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.machine.store import resolved, text
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.tools.workflow_catalogue import PublishedWorkflows, WorkflowDefinition


@dataclass(frozen=True)
class PublishedVersion:
    """What a publish did with one definition: its version, and whether it is new."""

    name: str
    version: int
    new: bool


class WorkflowCatalogue:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._publish = redis.register_script(
            scripts.script("agentq.orchestrator.runs", "publish_workflow")
        )

    async def publish(self, definitions: Sequence[WorkflowDefinition]) -> list[PublishedVersion]:
        done: list[PublishedVersion] = []
        with redis_errors_mapped():
            for definition in definitions:
                version, new = await self._publish(
                    keys=[keys.WORKFLOWS], args=[definition.name, definition.canonical()]
                )
                done.append(PublishedVersion(definition.name, int(version), bool(int(new))))
        return done

    async def read(self) -> PublishedWorkflows:
        """Every version of every published workflow."""
        with redis_errors_mapped():
            raw = await resolved(self.redis.hgetall(keys.WORKFLOWS))
        found: dict[str, dict[int, WorkflowDefinition]] = {}
        for field, value in raw.items():
            name, at, version = text(field).rpartition("@")
            if at:
                found.setdefault(name, {})[int(version)] = WorkflowDefinition.model_validate_json(
                    value
                )
        return found
