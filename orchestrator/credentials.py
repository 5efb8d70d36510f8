"""`client.credentials`: which short-lived credentials a deployment's doors issued are
still live (agentq serve's tokens), so that one can be ended before it expires.

A credential is recorded under the key that issued it while it lives, and revoking it
deletes the record: a door checks a credential's signature itself and asks here only
whether it was revoked. Recorded under the issuer, a credential can be revoked only by
it: another issuer's revocation names another record.
"""

from __future__ import annotations

import math

from redis.asyncio import Redis

from agentq.orchestrator.core import keys
from agentq.orchestrator.redis.faults import redis_errors_mapped


class Credentials:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def issued(self, issuer: str, credential_id: str, ttl_s: float) -> None:
        """Record a new credential as live for `ttl_s` (its lifetime)."""
        with redis_errors_mapped():
            await self.redis.set(
                keys.credential(issuer, credential_id), 1, ex=max(1, math.ceil(ttl_s))
            )

    async def live(self, issuer: str, credential_id: str) -> bool:
        with redis_errors_mapped():
            return bool(await self.redis.exists(keys.credential(issuer, credential_id)))

    async def revoke(self, issuer: str, credential_id: str) -> bool:
        """End a credential `issuer` issued; False when it has no such live one (never
        issued, another issuer's, expired or revoked already)."""
        with redis_errors_mapped():
            return bool(await self.redis.delete(keys.credential(issuer, credential_id)))
