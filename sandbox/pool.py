"""A warm pool: idle, already-started containers of one shape.

A pooled container has its driver running and its interpreter loaded, so a
call taken from the pool pays for one request/response on an open socket,
not for a container start. The pool refills itself in the background after
every `take`, but only with slots nobody is waiting for (`try_reserve`), so
it never competes with a request for capacity.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from agentq.sandbox.container import SandboxContainer, Shape

log = logging.getLogger(__name__)

_RETRY_FIRST_S = 0.5
_RETRY_MAX_S = 30.0


class WarmPool:
    def __init__(
        self,
        shape: Shape,
        size: int,
        *,
        try_reserve: Callable[[], bool],
        spawn: Callable[[Shape], Awaitable[SandboxContainer]],
        discard: Callable[[SandboxContainer], None],
    ) -> None:
        """`spawn` starts a container in a reserved slot (releasing it if it fails);
        `discard` destroys one and frees its slot, in the background."""
        self.shape = shape
        self.size = size
        self._try_reserve = try_reserve
        self._spawn = spawn
        self._discard = discard
        self._idle: deque[SandboxContainer] = deque()
        self._starting = 0
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._closing = asyncio.Event()
        self._retry_s = _RETRY_FIRST_S

    @property
    def idle(self) -> int:
        return len(self._idle)

    def take(self) -> SandboxContainer | None:
        container = None
        while self._idle and container is None:
            candidate = self._idle.popleft()
            if candidate.alive():  # not killed behind our back since it was started
                container = candidate
            else:
                self._discard(candidate)
        self.refill()
        return container

    def evict_one(self) -> bool:
        """Give an idle container's slot back (for a request of another shape)."""
        if not self._idle:
            return False
        self._discard(self._idle.pop())
        return True

    def refill(self) -> None:
        if self._closed or (self._task is not None and not self._task.done()):
            return
        if len(self._idle) + self._starting < self.size:
            self._task = asyncio.get_running_loop().create_task(self._fill())

    async def ready(self, timeout_s: float) -> None:
        """Wait until the pool is full (or its filling stopped); for tests and benches."""
        async with asyncio.timeout(timeout_s):
            while len(self._idle) < self.size and self._task is not None:
                task = self._task
                await asyncio.shield(task)
                if self._task is task:
                    break

    async def _fill(self) -> None:
        while not self._closed and len(self._idle) + self._starting < self.size:
            if not self._try_reserve():
                return  # full: a freed slot calls refill() again
            self._starting += 1
            try:
                container = await self._spawn(self.shape)
            except Exception as exc:
                log.warning("sandbox pool %s: start failed: %s", self.shape.image, exc)
                await self._pause(self._retry_s)
                self._retry_s = min(self._retry_s * 2, _RETRY_MAX_S)
                continue
            finally:
                self._starting -= 1
            self._retry_s = _RETRY_FIRST_S
            if self._closed:
                self._discard(container)
                return
            self._idle.append(container)

    async def _pause(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._closing.wait()
        except TimeoutError:
            pass

    async def aclose(self) -> None:
        # Not cancelled: a start cancelled halfway could leave a container
        # nobody tracks. It finishes (bounded by the ready timeout) and is discarded.
        self._closed = True
        self._closing.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        while self._idle:
            self._discard(self._idle.pop())
