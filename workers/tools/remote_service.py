"""What `agentq serve` runs for the deployment's remote tools (agentq/serve/remote.py
serves their lease routes): it announces the tools, reaps lapsed leases, and pushes the
calls of queues with a webhook.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

import httpx

from agentq.orchestrator.client import Client
from agentq.orchestrator.tools.announcements import ANNOUNCE_EVERY_S
from agentq.orchestrator.tools.base import ToolAnnouncement
from agentq.orchestrator.tools.remote import RemoteTools
from agentq.workers.tools.remote import RemoteLeases
from agentq.workers.tools.remote_push import PushDispatcher

log = logging.getLogger("agentq.remote")


class RemoteService:
    """What `agentq serve` runs for remote tools, started with the app."""

    def __init__(self, client: Client, declared: RemoteTools) -> None:
        self.client = client
        self.declared = declared
        settings = client.settings
        # The leases are the executing half of a remote tool's call: they drive the run
        # and call stores directly, as every worker does.
        self.leases = RemoteLeases(
            client.redis,
            client.runs.store,
            max_deliveries=settings.max_deliveries,
            max_output_bytes=settings.max_tool_output_bytes,
        )
        self._http = httpx.AsyncClient(follow_redirects=False)
        self._tasks: list[asyncio.Task[None]] = []
        self._pushers: list[PushDispatcher] = []

    async def start(self) -> None:
        """Announce the remote tools (a run may name them as soon as serve answers), then
        keep them announced, reap lapsed leases and push the webhook queues' calls."""
        if not self.declared.tools:
            return
        await self.client.fleet.announce(self._announcements)
        self._tasks.append(asyncio.create_task(self._announce_forever()))
        self._tasks.append(
            asyncio.create_task(self.leases.reap_forever(self.client.settings.lease_s))
        )
        for queue, hook in self.declared.webhooks.items():
            pusher = PushDispatcher(self.leases, queue, hook, self._http, os.environ)
            self._pushers.append(pusher)
            self._tasks.append(asyncio.create_task(pusher.run_forever()))

    @property
    def _announcements(self) -> list[ToolAnnouncement]:
        return [t.announcement() for t in self.declared.tools]

    async def _announce_forever(self) -> None:
        while True:
            await asyncio.sleep(ANNOUNCE_EVERY_S)
            try:
                await self.client.fleet.announce(self._announcements)
            except Exception as exc:  # the next round retries
                log.warning("announcing remote tools failed: %s", exc)

    async def aclose(self) -> None:
        for pusher in self._pushers:
            await pusher.aclose()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._http.aclose()
