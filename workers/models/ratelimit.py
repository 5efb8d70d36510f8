"""One provider quota for the whole fleet, kept in Redis.

Every worker asks the same Lua script before a call, so requests per minute and
tokens per minute (in any sliding window of `Limits.window_s`, 60 s by default) are
counted once per (provider, model, API key hash) however
many workers there are. Tokens are estimated before the call and corrected from
the reported usage after it. Limits come from the deployment and from the
providers' rate-limit headers (the lower wins); a 429 sets a shared back-off
that every worker honours. The API key itself never reaches Redis: only a hash.

The model client (model_client.py) wraps every rate-limited call in
`RateLimitedProvider`; response headers reach it through the list its
provider's header observer fills.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import httpx

from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import ProviderError
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.policy.endpoints import Endpoint
from agentq.workers.models.base import DeltaSink, ModelRequest, ModelResponse, Provider

log = logging.getLogger(__name__)

WINDOW_S = 60.0
LEARNED_TTL_S = 3600

# A sliding log, not fixed windows: fixed windows let 2x the limit through around a
# boundary (a full window's worth at its end, another at the next one's start), which a
# provider counting any 60 s would refuse. Each admitted call is a ticket in a sorted set
# (score: admission time) with its tokens in a hash and their sum in a counter; tickets
# older than the window are dropped on the next acquire (lua/rate_*.lua).
ACQUIRE = scripts.script("agentq.workers.models", "rate_acquire")
CORRECT = scripts.script("agentq.workers.models", "rate_correct")
BACKOFF = scripts.script("agentq.workers.models", "rate_backoff")


class RedisLike(Protocol):
    """The part of `redis.asyncio.Redis` (or fakeredis) the limiter uses."""

    async def eval(self, script: str, numkeys: int, *keys_and_args: Any) -> Any: ...
    async def hset(self, name: str, mapping: Mapping[str, Any]) -> Any: ...
    async def expire(self, name: str, time: int) -> Any: ...


@dataclass(frozen=True)
class Limits:
    """Configured per deployment, per (provider, model); None = not limited here.

    The limits hold in any sliding window of `window_s` seconds: "per minute" with the
    default. A shorter window scales a quota down for tests and benchmarks."""

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    window_s: float = WINDOW_S


@dataclass(frozen=True)
class LimitKey:
    provider: str
    model: str
    key_hash: str

    @property
    def prefix(self) -> str:
        return keys.rate_limit(self.provider, self.model, self.key_hash)


def limit_key(endpoint: Endpoint, env: Mapping[str, str]) -> LimitKey:
    """One quota per provider, model, key and URL; the key enters only as a hash."""
    secret = env.get(endpoint.key_env or "", "") + "|" + (endpoint.base_url or "")
    digest = hashlib.sha256(secret.encode()).hexdigest()[:16]
    return LimitKey(endpoint.provider.name, endpoint.model, digest)


def estimate_tokens(request: ModelRequest) -> int:
    """About 4 characters a token, plus the output budget the request reserves."""
    payload = json.dumps(
        [m.model_dump(mode="json") for m in request.messages]
        + [t.model_dump(mode="json") for t in request.tools]
        + [request.system or ""],
        default=str,
    )
    options = request.model.options
    reserved = options.get("max_tokens") or options.get("max_output_tokens") or 0
    return len(payload) // 4 + int(reserved)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_reset(value: str, now_s: float) -> float | None:
    """Seconds until reset: OpenAI's "6m0s" / "20ms" or Anthropic's RFC 3339 time."""
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value.strip():
        scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        return sum(float(n) * scale[u] for n, u in parts)
    try:
        return max(0.0, datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() - now_s)
    except ValueError:
        return None


def learned_from_headers(headers: Mapping[str, str], now_s: float) -> tuple[Limits, float | None]:
    """(the limits a provider announced, seconds to back off if a budget is exhausted)."""
    h = {k.lower(): v for k, v in headers.items()}

    def number(*names: str) -> int | None:
        for name in names:
            if name in h:
                try:
                    return int(float(h[name]))
                except ValueError:
                    return None
        return None

    limits = Limits(
        requests_per_minute=number(
            "x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit"
        ),
        tokens_per_minute=number(
            "x-ratelimit-limit-tokens",
            "anthropic-ratelimit-tokens-limit",
            "anthropic-ratelimit-input-tokens-limit",
        ),
    )
    backoff: float | None = None
    for remaining, reset in (
        ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
        ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ):
        if h.get(remaining) == "0" and reset in h:
            backoff = parse_reset(h[reset], now_s)
    return limits, backoff


class RateLimiter:
    def __init__(
        self,
        redis: RedisLike,
        limits: Mapping[tuple[str, str], Limits] | None = None,
        *,
        default_backoff_s: float = 5.0,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.redis = redis
        self.limits = dict(limits or {})
        self.default_backoff_s = default_backoff_s
        self.sleep = sleep

    def configured(self, key: LimitKey) -> Limits:
        return self.limits.get((key.provider, key.model)) or self.limits.get(
            (key.provider, "*"), Limits()
        )

    async def try_acquire(self, key: LimitKey, tokens: int) -> tuple[float, str]:
        """(seconds to wait, "") when over a limit; (0, ticket) when the call may go."""
        limits = self.configured(key)
        wait_ms, ticket, *admitted = await self.redis.eval(
            ACQUIRE,
            1,
            key.prefix,
            tokens,
            limits.requests_per_minute or 0,
            limits.tokens_per_minute or 0,
            max(1, round(limits.window_s * 1000)),
            uuid.uuid4().hex,
        )
        if isinstance(ticket, bytes):
            ticket = ticket.decode()
        if admitted:
            # The instant the window counts this call at: what a provider's quota is
            # judged against (the request reaches it a transit time later).
            log.info(
                "rate limit %s:%s: call admitted at %d ms (Redis clock)",
                key.provider,
                key.model,
                int(admitted[0]),
            )
        return int(wait_ms) / 1000.0, str(ticket or "")

    async def acquire(self, key: LimitKey, tokens: int, deadline: float | None = None) -> str:
        """Wait for capacity; raise a retryable ProviderError rather than wait past the
        deadline (time.monotonic)."""
        while True:
            wait_s, ticket = await self.try_acquire(key, tokens)
            if wait_s <= 0:
                return ticket
            if deadline is not None and time.monotonic() + wait_s >= deadline:
                raise ProviderError(
                    f"{key.provider}:{key.model}: the shared rate limit would delay the call "
                    f"{wait_s:.1f} s, past its deadline",
                    retryable=True,
                )
            await self.sleep(wait_s)

    async def correct(self, key: LimitKey, ticket: str, estimated: int, actual: int) -> None:
        if ticket and actual and actual != estimated:
            await self.redis.eval(CORRECT, 1, key.prefix, ticket, actual - estimated)

    async def backoff(self, key: LimitKey, seconds: float) -> None:
        await self.redis.eval(BACKOFF, 1, key.prefix, max(0.0, seconds))

    async def learn(self, key: LimitKey, limits: Limits) -> None:
        values = {
            name: value
            for name, value in (
                ("rpm", limits.requests_per_minute),
                ("tpm", limits.tokens_per_minute),
            )
            if value
        }
        if values:
            await self.redis.hset(f"{key.prefix}:learned", mapping=values)
            await self.redis.expire(f"{key.prefix}:learned", LEARNED_TTL_S)


class RateLimitedProvider:
    """Wraps one provider call in acquire → generate → correct, learning from the
    response headers the inner provider's observer collected into `seen`."""

    def __init__(
        self, inner: Provider, limiter: RateLimiter, key: LimitKey, seen: list[httpx.Headers]
    ) -> None:
        self.inner = inner
        self.limiter = limiter
        self.key = key
        self.seen = seen

    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        estimated = estimate_tokens(request)
        ticket = await self.limiter.acquire(
            self.key, estimated, time.monotonic() + request.timeout_s
        )
        self.seen.clear()
        try:
            response = await self.inner.generate(request, sink)
        except ProviderError as error:
            if error.status == 429:
                wait_s = error.retry_after_s
                if wait_s is None:
                    wait_s = self.limiter.default_backoff_s
                await self.limiter.backoff(self.key, wait_s)
            raise
        finally:
            await self._learn()
        await self.limiter.correct(self.key, ticket, estimated, response.usage.total_tokens)
        return response

    async def _learn(self) -> None:
        seen, self.seen[:] = list(self.seen), []
        for headers in seen:
            limits, backoff = learned_from_headers(headers, time.time())
            await self.limiter.learn(self.key, limits)
            if backoff:
                await self.limiter.backoff(self.key, backoff)
