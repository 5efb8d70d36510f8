"""The client API: one connection to Redis, and a sub-client per thing you can drive.

async with Client("redis://localhost:6379") as client:
    run_id = await client.runs.submit(spec)
    async for event in client.runs.events(run_id, follow=True):
        ...
    result = await client.runs.wait(run_id)

- `client.runs`: submit, read, list, follow, approve, answer, cancel, retry, fork, replay;
- `client.calls`: the fleet's tools called without a run;
- `client.batches`: many runs from lines of JSON, admitted by the fleet;
- `client.threads`: conversations whose runs continue one another;
- `client.schedules`: cron schedules, a run per tick, fired by the fleet;
- `client.fleet`: the workers alive, the tools they serve, their queues' depths;
- `client.concurrency`: a tenant's active concurrency keys, each key's load;
- `client.credentials`: which tokens the doors issued are live (revoking one).

The front doors (CLI, HTTP API, MCP gateway, dashboard) reach Redis through these
sub-clients only (tests/architecture/test_doors.py).
"""

from __future__ import annotations

import secrets
from functools import cached_property
from typing import TYPE_CHECKING

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.resource import AsyncResource
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.connect import connect
from agentq.orchestrator.redis.faults import redis_errors_mapped
from agentq.orchestrator.runs.api import Runs
from agentq.orchestrator.threads.api import Threads

# The sub-clients a command may not need are built, and their modules imported, on first
# use: a CLI command is a process of its own, and `agentq events` has no use for the
# batches', schedules', calls' or fleet's modules (croniter among them).
if TYPE_CHECKING:
    from agentq.orchestrator.batches.api import Batches
    from agentq.orchestrator.calls.api import ToolCalls
    from agentq.orchestrator.credentials import Credentials
    from agentq.orchestrator.fleet.api import Fleet
    from agentq.orchestrator.runs.shared_budgets import SharedBudgets
    from agentq.orchestrator.schedules.api import Schedules


class Client(AsyncResource):
    def __init__(
        self,
        redis_url: str | None = None,
        *,
        redis: Redis | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.redis = (
            redis
            if redis is not None
            else connect(redis_url or self.settings.redis_url, self.settings)
        )
        self._owns_redis = redis is None
        self.runs = Runs(self.redis, self.settings)
        self.threads = Threads(self.redis, self.settings, self.runs)
        self.runs.turns = self.threads  # a run naming a thread takes the thread's turn
        self.concurrency = self.runs.concurrency  # the tenants' active concurrency keys

    @cached_property
    def calls(self) -> ToolCalls:
        from agentq.orchestrator.calls.api import ToolCalls

        return ToolCalls(self.runs.store, self.redis, self.settings)

    @cached_property
    def batches(self) -> Batches:
        from agentq.orchestrator.batches.api import Batches

        return Batches(self.redis, self.settings, self.runs)

    @cached_property
    def schedules(self) -> Schedules:
        from agentq.orchestrator.schedules.api import Schedules

        return Schedules(self.redis, self.settings, self.runs)

    @cached_property
    def fleet(self) -> Fleet:
        from agentq.orchestrator.fleet.api import Fleet

        return Fleet(self.redis, self.runs.store)

    @cached_property
    def budgets(self) -> SharedBudgets:
        """The batches' and tenants' shared budgets."""
        return self.batches.budgets

    @cached_property
    def credentials(self) -> Credentials:
        from agentq.orchestrator.credentials import Credentials

        return Credentials(self.redis)

    async def ping(self) -> None:
        """Whether Redis answers: InfrastructureError when it does not."""
        with redis_errors_mapped():
            await self.redis.ping()

    async def shared_secret(self, name: str) -> str:
        """A random secret every process of this deployment reads alike: the first to ask
        creates it (e.g. `agentq serve`'s token signing key when none is configured)."""
        key = keys.shared_secret(name)
        with redis_errors_mapped():
            await self.redis.set(key, secrets.token_urlsafe(32), nx=True)
            stored = await self.redis.get(key)
        assert stored is not None, f"the shared secret {name!r} vanished right after it was set"
        return stored.decode() if isinstance(stored, bytes) else str(stored)

    async def aclose(self) -> None:
        if self._owns_redis:
            await self.redis.aclose()
