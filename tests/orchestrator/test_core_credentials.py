"""`client.credentials`: a token the doors issued is live until it expires or its issuer
revokes it, and no other issuer can revoke it."""

from __future__ import annotations

import pytest
from fakeredis import FakeAsyncRedis, FakeServer

from agentq.orchestrator.core import keys
from agentq.orchestrator.credentials import Credentials

pytestmark = pytest.mark.component


async def test_a_credential_lives_until_its_issuer_revokes_it() -> None:
    redis = FakeAsyncRedis(server=FakeServer())
    credentials = Credentials(redis)
    await credentials.issued("sha256:a", "t1", 59.2)
    await credentials.issued("sha256:a", "t2", 60)
    assert await credentials.live("sha256:a", "t1")
    assert 59 <= await redis.ttl(keys.credential("sha256:a", "t1")) <= 60  # its lifetime
    # Another issuer's revocation names another record: the token lives on.
    assert not await credentials.live("sha256:b", "t1")
    assert not await credentials.revoke("sha256:b", "t1")
    assert await credentials.live("sha256:a", "t1")
    assert await credentials.revoke("sha256:a", "t1")
    assert not await credentials.live("sha256:a", "t1")
    assert not await credentials.revoke("sha256:a", "t1")  # ended already
    assert await credentials.live("sha256:a", "t2")
