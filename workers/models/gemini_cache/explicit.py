"""A step's request with its batch's cached content, and the batch's end.

`attach` is asked before each direct model call. A request gets a cached content when it
is a batch's line (its cache scope names the batch, running in its tenant), caching is
on, its endpoint speaks Gemini and its prefix is long enough (prefix.py). The first step
of the batch with that prefix creates it; every later one, on any worker, names it. What
creating it cost is the creating step's: its tokens are that step's cache writes.
Anything short of a cached content (the API refused one, its create failed, the wait for
another worker's create ran out) leaves the request as it was: the implicit cache still
reads its prefix.

`release`, when the batch has ended, deletes them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from redis.asyncio import Redis

from agentq.orchestrator.batches.state import BatchField, BatchStatus
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.core.messages import Usage
from agentq.orchestrator.machine.store import resolved, text
from agentq.orchestrator.policy.caching import CacheScope, cache_policy
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models.base import ModelRequest
from agentq.workers.models.driver import HttpProvider
from agentq.workers.models.gemini import GeminiWire
from agentq.workers.models.gemini_cache import api
from agentq.workers.models.gemini_cache.prefix import CachePlan, plan
from agentq.workers.models.gemini_cache.store import NONE, PrefixRecord, take_all
from agentq.workers.models.model_client import ModelClient

log = logging.getLogger("agentq.models")

WIRE = "gemini"  # the wire format (orchestrator/policy/providers.py) that has cached contents
# How long the create may take before another worker may try it (a worker died in it).
HOLD_S = api.TIMEOUT_S * 2


@dataclass(frozen=True)
class Attached:
    request: ModelRequest
    written_tokens: int = 0  # the cached content this step created

    def charged(self, usage: Usage) -> Usage:
        """The step's usage with the creation in it: billed as cache writes."""
        if not self.written_tokens:
            return usage
        n = self.written_tokens
        return usage.model_copy(
            update={
                "input_tokens": usage.input_tokens + n,
                "cache_write_tokens": usage.cache_write_tokens + n,
                "total_tokens": usage.total_tokens + n,
            }
        )


async def attach(models: ModelClient, redis: Redis, request: ModelRequest) -> Attached:
    scope = request.cache_scope
    if scope is None or scope.batch is None or models.wire(request.model) != WIRE:
        return Attached(request)
    provider = await models.http_provider(request)
    if provider is None or not isinstance(provider.wire, GeminiWire):
        return Attached(request)
    served = provider.served(request)
    policy = cache_policy(served.model.options)
    if not policy.enabled:
        return Attached(request)
    e = provider.endpoint
    wanted = plan(e.model, provider.wire.cached_prefix(served), policy.ttl, [e.base_url, e.key_env])
    if wanted is None or not await _running(redis, scope):
        return Attached(request)
    record = PrefixRecord(redis, scope.tenant, scope.batch, wanted.digest)
    name, written = await _named(record, provider, wanted, request)
    if name is None:
        return Attached(request)
    return Attached(request.model_copy(update={"cached_content": name}), written)


async def _running(redis: Redis, scope: CacheScope) -> bool:
    """The batch exists in the run's tenant and runs: a lone run that names a batch in its
    metadata gets nothing the batch would not have."""
    assert scope.batch is not None
    raw = await resolved(redis.hget(keys.batch_meta(scope.tenant, scope.batch), BatchField.STATUS))
    return raw is not None and text(raw) == BatchStatus.RUNNING


async def _named(
    record: PrefixRecord, provider: HttpProvider, wanted: CachePlan, request: ModelRequest
) -> tuple[str | None, int]:
    """The prefix's cached content and the tokens this call wrote to create it."""
    known = await record.name()
    if known is None and not await record.claim(HOLD_S):
        known = await record.wait(HOLD_S, wanted.usable_ms)  # another worker creates it
        return (None if known in (None, NONE) else known), 0
    if known is None and (known := await record.name()) is not None:
        await record.unclaim()  # published between the look and the claim
    if known is not None:
        return (None if known == NONE else known), 0
    label = request.model.label
    try:
        created = await api.create(provider, wanted.body, label)
    except ProviderError as exc:
        log.warning("no cached content for a batch's prefix: %s", exc.message)
        # A refusal stands for the TTL (the prefix is too short, the model takes none);
        # anything else, the next step tries again.
        refused = exc.status is not None and 400 <= exc.status < 500 and not exc.retryable
        await record.publish(NONE if refused else "", wanted.usable_ms)
        return None, 0
    entry = json.dumps({"name": created.name, "model": request.model.model_dump(mode="json")})
    await record.publish(created.name, wanted.usable_ms, entry)
    return created.name, created.tokens


async def release(models: ModelClient, redis: Redis, tenant: str, batch_id: str) -> int:
    """Delete the ended batch's cached contents; how many this call deleted. One that
    cannot be deleted now is left to its TTL."""
    deleted = 0
    for entry in (await take_all(redis, tenant, batch_id)).values():
        parsed = json.loads(entry)
        ref = ModelRef.model_validate(parsed["model"])
        try:
            provider = await models.http_provider(ModelRequest(model=ref, messages=[]))
            if provider is not None:
                await api.delete(provider, parsed["name"], ref.label)
                deleted += 1
        except ProviderError as exc:
            log.warning("batch %s: cached content left to its TTL: %s", batch_id, exc.message)
    return deleted
