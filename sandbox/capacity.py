"""Admission by capacity: a counted set of container slots with a FIFO queue."""

from __future__ import annotations

import asyncio
from collections import deque


class Capacity:
    """At most `limit` slots held at once.

    A released slot goes straight to the oldest waiter, so background pool
    refills (`try_acquire`) never overtake a request that is waiting.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.done())

    def try_acquire(self) -> bool:
        if self.used < self.limit and not self.waiting:
            self.used += 1
            return True
        return False

    async def acquire(self, timeout_s: float) -> bool:
        """Wait for a slot; False if none came within `timeout_s`."""
        if self.try_acquire():
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
        except TimeoutError:
            # The slot may have been handed over just as the deadline hit.
            return waiter.done() and not waiter.cancelled()
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed over to a caller that is going away
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        return True

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot changes hands; `used` is unchanged
                return
        self.used = max(0, self.used - 1)
