"""Who owns a sandbox container, and whether that owner is provably gone.

Every `SandboxManager` owns its containers under a unique instance id (a
label) and keeps a liveness record for that id fresh. Another manager on the
same engine removes a container only when its owner's record has expired:
never because of a hostname, a start-up, or a guess. The worker implements
`Liveness` on Redis (a key with a TTL); `LocalLiveness` is the in-memory
implementation for one process (tests, a single embedded worker).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Protocol


class Liveness(Protocol):
    async def beat(self, owner: str, ttl_s: float) -> None:
        """Record that `owner` is alive for the next `ttl_s` seconds."""
        ...

    async def gone(self, owners: Collection[str]) -> set[str]:
        """Those of `owners` whose record has expired (or was dropped by `forget`).

        An owner this store cannot vouch for either way is not gone.
        """
        ...

    async def forget(self, owner: str) -> None:
        """`owner` stopped cleanly: its record goes at once."""
        ...


class LocalLiveness:
    """Liveness records in this process's memory.

    Shared by the managers of one process; an owner it never heard of is not
    gone (it may live in another process), so with this store a manager only
    ever removes containers of owners of its own process.
    """

    def __init__(self) -> None:
        self._expires: dict[str, float] = {}

    async def beat(self, owner: str, ttl_s: float) -> None:
        self._expires[owner] = time.monotonic() + ttl_s

    async def gone(self, owners: Collection[str]) -> set[str]:
        now = time.monotonic()
        return {owner for owner in owners if self._expires.get(owner, now + 1) <= now}

    async def forget(self, owner: str) -> None:
        if owner in self._expires:
            self._expires[owner] = 0.0


PROCESS_LIVENESS = LocalLiveness()
