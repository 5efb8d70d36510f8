"""The collector: every model worker runs one; per group, only the lease holder acts.

Each tick, for each group whose lease this worker holds (taken when free or
lapsed, renewed every tick), it advances the group's in-flight batches (submit
what is formed but not yet submitted, poll what is submitted, deliver what has
ended) and forms a new batch when the queue is big or old enough. A worker
that dies leaves its lease to lapse; the next holder finds the batch records
as far as they got and goes on from there: polling a submitted batch, never
submitting it again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.redis.faults import is_transient
from agentq.workers.models import ModelRequest
from agentq.workers.models.batch.store import ProviderBatchStore
from agentq.workers.models.batch_api import BatchApi, BatchLine, LineResult
from agentq.workers.models.model_client import ModelClient
from agentq.workers.queue.liveness import OUTAGE

log = logging.getLogger("agentq.provider_batch")

# Batch states in its record.
NEW = "new"  # members recorded, nothing sent yet
SUBMITTING = "submitting"  # sent, or being sent: a new holder looks before sending again
SUBMITTED = "submitted"  # the provider has it: poll


def custom_id(index: int) -> str:
    """The line's id within its batch (fits Anthropic's 64 characters of [A-Za-z0-9_-])."""
    return f"aq-{index}"


class Collector:
    def __init__(self, redis: Redis, models: ModelClient, settings: Settings, owner: str) -> None:
        self.store = ProviderBatchStore(redis, retention_s=settings.retention_s)
        self.models = models
        self.settings = settings
        self.owner = owner

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.provider_batch_poll_s)
            try:
                await self.tick()
            except Exception as exc:
                if is_transient(exc):
                    await asyncio.sleep(OUTAGE.failed(exc))
                    continue
                log.exception("provider batches: collecting failed")

    async def tick(self) -> None:
        for group in await self.store.groups():
            if await self.store.take_lease(group, self.owner, self.settings.provider_batch_lease_s):
                try:
                    await self.collect(group)
                except ProviderError as exc:  # the provider's trouble: try again next tick
                    log.warning("provider batch group %s: %s", group, exc.message)

    async def _api(self, group: str) -> BatchApi | None:
        ref = await self.store.group_ref(group)
        if ref is None:
            return None
        request = ModelRequest(model=ModelRef.model_validate_json(ref), messages=[])
        provider = await self.models.batch_provider(request)
        return None if provider is None else provider.batch_api(request)

    async def collect(self, group: str) -> None:
        try:
            api = await self._api(group)
        except ProviderError as exc:
            if exc.retryable:
                raise
            await self._refuse_pending(group, exc.message)  # e.g. the endpoint is no longer allowed
            return
        if api is None:
            return
        for batch_id in await self.store.inflight(group):
            await self.advance(api, group, batch_id)
        s = self.settings
        while True:
            batch_id = uuid.uuid4().hex
            if (
                await self.store.form(
                    group, batch_id, s.provider_batch_max_requests, s.provider_batch_max_age_s
                )
                is None
            ):
                return
            await self.advance(api, group, batch_id)

    async def _refuse_pending(self, group: str, message: str) -> None:
        """The group's endpoint cannot be reached any more: its waiting steps get the
        error (their runs fail as a direct call would) instead of waiting forever."""
        batch_id = uuid.uuid4().hex
        members = await self.store.form(group, batch_id, 1_000_000, 0)
        for index, member in enumerate(members or []):
            await self._deliver(
                group, member, LineResult(custom_id=custom_id(index), error=message)
            )
        if members:
            await self.store.end_batch(group, batch_id)

    async def _holding(self, group: str) -> bool:
        """Renew before an irreversible step; a worker that lost its group stops."""
        return await self.store.take_lease(group, self.owner, self.settings.provider_batch_lease_s)

    async def advance(self, api: BatchApi, group: str, batch_id: str) -> None:
        record = await self.store.batch(group, batch_id)
        members: list[str] = json.loads(record.get("members", "[]"))
        state = record.get("state")
        provider_id = record.get("provider_id")
        if state == SUBMITTING:
            provider_id = await api.find(batch_id)  # the last holder died while sending
            if provider_id is not None:
                await self.store.update_batch(
                    group, batch_id, state=SUBMITTED, provider_id=provider_id
                )
                state = SUBMITTED
        if state in (NEW, SUBMITTING):
            if not await self._holding(group):
                return
            lines, lost = await self._lines(members)
            for index in lost:
                await self._deliver(
                    group,
                    members[index],
                    LineResult(
                        custom_id=custom_id(index),
                        error="the run ended or its request expired before submission",
                        retryable=True,
                    ),
                )
            if not lines:
                await self.store.end_batch(group, batch_id)
                return
            await self.store.update_batch(group, batch_id, state=SUBMITTING)
            provider_id = await api.submit(lines, batch_id)
            await self.store.update_batch(group, batch_id, state=SUBMITTED, provider_id=provider_id)
            log.info("provider batch %s submitted: %d request(s)", provider_id, len(lines))
            return
        if provider_id is None:
            return
        polled = await api.poll(provider_id)
        if not polled.ended:
            return
        answers = {r.custom_id: r for r in await api.results(polled)}
        for index, member in enumerate(members):
            cid = custom_id(index)
            answer = answers.get(cid) or LineResult(
                custom_id=cid,
                error=f"the provider batch ended {polled.status} without an answer",
                retryable=True,
            )
            await self._deliver(group, member, answer)
        await self.store.end_batch(group, batch_id)
        log.info("provider batch %s %s: %d answer(s)", provider_id, polled.status, len(members))

    async def _lines(self, members: list[str]) -> tuple[list[BatchLine], list[int]]:
        lines: list[BatchLine] = []
        lost: list[int] = []
        for index, member in enumerate(members):
            run_id, step = keys.parse_batch_member(member)
            parked = await self.store.parked(run_id, step)
            if parked.body is None or parked.path is None or await self.store.run_ended(run_id):
                lost.append(index)
                continue
            lines.append(BatchLine(custom_id(index), parked.path, json.loads(parked.body)))
        return lines, lost

    async def _deliver(self, group: str, member: str, answer: LineResult) -> None:
        await self.store.deliver(group, member, answer.model_dump_json())
