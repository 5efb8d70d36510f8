"""`SandboxManager`: the API a worker calls to run code.

    async with SandboxManager(DockerBackend(), SandboxConfig(worker_id="w1")) as manager:
        result = await manager.execute(ExecRequest(language="python", code="1 + 1"))
        result = await manager.execute(request, session_key=run_id)  # session: "run"
        await manager.close_session(run_id)                          # when the run ends

- `session_key=None` (session "call"): a fresh container per call, taken warm
  from the pool when the request has the default container limits, destroyed
  right after (in the background: the caller does not wait for the removal).
- `session_key=K` (session "run"): one container per (K, container shape:
  language, image, container limits, network), kept until `close_session(K)`,
  the idle timeout, or a kill (timeout, OOM, output cap), after which the next
  call starts fresh and the result says the state was lost. The map from
  session to container lives in this process; a fleet of workers routes a
  session's calls to the manager that holds it (see workers/tools).
- Admission: at most `max_containers` containers alive at once (pool included);
  a request that finds none free waits, evicting idle pool containers of other
  shapes, and raises `CapacityError` after `admission_timeout_s`.
- Ownership: every container carries this manager's unique instance id, whose
  liveness record (`Liveness`) the manager keeps fresh, and its fleet's id
  (`SandboxConfig.fleet_id`). Containers of the same fleet whose owner's record
  has expired, seen so at two sweeps an owner TTL apart, are removed; nothing
  else is: another fleet's owners keep their records in another store, where
  this manager cannot see them. `aclose` removes everything this instance created
  and drops its record. A pooled container is checked alive before it is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from types import TracebackType

from agentq.sandbox.backend import SandboxBackend
from agentq.sandbox.capacity import Capacity
from agentq.sandbox.config import (
    LABEL_FLEET,
    LABEL_LANGUAGE,
    LABEL_MANAGER,
    LABEL_SANDBOX,
    LABEL_WORKER,
    SandboxConfig,
)
from agentq.sandbox.container import SandboxContainer, Shape
from agentq.sandbox.errors import (
    CapacityError,
    InvalidRequestError,
    SandboxError,
    SandboxUnavailableError,
    SessionLostError,
)
from agentq.sandbox.liveness import PROCESS_LIVENESS, Liveness
from agentq.sandbox.models import ExecRequest, ExecResult, Language, Limits
from agentq.sandbox.pool import WarmPool

log = logging.getLogger(__name__)

SessionKey = tuple[str, tuple[object, ...]]  # (session key, container shape key)


@dataclass
class ManagerStats:
    """Counters for tests, benchmarks and metrics."""

    warm_starts: int = 0  # calls served by a pooled container
    cold_starts: int = 0  # containers started for a call that was waiting
    calls: int = 0


def check_ceiling(limits: Limits, ceiling: Limits) -> None:
    """Refuse, naming the field, any limit above what this worker allows."""
    for name, value in limits.model_dump().items():
        allowed = getattr(ceiling, name)
        if value > allowed:
            raise InvalidRequestError(
                f"limits.{name}", f"{value} is above this worker's maximum of {allowed}"
            )


class SandboxManager:
    def __init__(
        self,
        backend: SandboxBackend,
        config: SandboxConfig | None = None,
        *,
        liveness: Liveness | None = None,
    ) -> None:
        self.backend = backend
        self.config = config or SandboxConfig()
        self.liveness: Liveness = liveness or PROCESS_LIVENESS
        self.instance_id = uuid.uuid4().hex
        self._suspects: set[str] = set()  # owners found gone at the last sweep
        self.stats = ManagerStats()
        self._capacity = Capacity(self.config.max_containers)
        self._pools: dict[tuple[object, ...], WarmPool] = {}
        self._sessions: dict[SessionKey, SandboxContainer] = {}
        self._session_locks: dict[SessionKey, asyncio.Lock] = {}
        self._pending: set[asyncio.Task[None]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False

    @property
    def labels(self) -> dict[str, str]:
        """Labels on every container this manager creates."""
        return {
            LABEL_SANDBOX: "1",
            LABEL_FLEET: self.config.fleet_id,
            LABEL_WORKER: self.config.worker_id,
            LABEL_MANAGER: self.instance_id,
        }

    async def __aenter__(self) -> SandboxManager:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Check the engine and images, remove orphans, start filling the pools."""
        if self._started:
            return
        await self.backend.ping()
        for image in sorted(set(self.config.images.values())):
            if not await self.backend.image_exists(image):
                raise SandboxUnavailableError(
                    f"sandbox image {image} is missing; run `agentq sandbox build-images`"
                )
        await self.liveness.beat(self.instance_id, self.config.owner_ttl_s)
        await self.remove_orphans()
        self._started = True
        for language, size in self.config.pool_size.items():
            if size > 0 and language in self.config.images:
                shape = self._shape(language, self.config.default_limits, network=False)
                pool = WarmPool(
                    shape,
                    size,
                    try_reserve=self._capacity.try_acquire,
                    spawn=self._spawn,
                    discard=self._discard,
                )
                self._pools[shape.key()] = pool
                pool.refill()
        loop = asyncio.get_running_loop()
        self._reaper = loop.create_task(self._reap_idle_sessions())
        self._keeper = loop.create_task(self._keep_ownership())

    async def remove_orphans(self) -> int:
        """Remove this fleet's containers whose owner is provably gone; return how many.

        Gone means: its liveness record had expired at the previous sweep and
        still has now. The second look covers a liveness store that lost its
        records (a Redis restart): live owners re-record well within a TTL.
        """
        found = await self.backend.labels({LABEL_SANDBOX: "1", LABEL_FLEET: self.config.fleet_id})
        owners = {labels.get(LABEL_MANAGER, "") for labels in found.values()}
        owners -= {"", self.instance_id}
        gone = await self.liveness.gone(owners) if owners else set()
        confirmed, self._suspects = gone & self._suspects, gone
        orphans = [cid for cid, labels in found.items() if labels.get(LABEL_MANAGER) in confirmed]
        await asyncio.gather(*(self.backend.remove(container) for container in orphans))
        if orphans:
            log.info(
                "removed %d sandbox containers of %d stopped owners", len(orphans), len(confirmed)
            )
        return len(orphans)

    async def _keep_ownership(self) -> None:
        """Refresh this manager's liveness record; sweep orphans once per TTL."""
        ttl_s = self.config.owner_ttl_s
        beats = 0
        while True:
            await asyncio.sleep(ttl_s / 3)
            beats += 1
            try:
                await self.liveness.beat(self.instance_id, ttl_s)
                if beats % 3 == 0:
                    await self.remove_orphans()
            except Exception as exc:  # keep serving; the next round retries
                log.warning("sandbox ownership upkeep failed: %s", exc)

    async def wait_pools_ready(self, timeout_s: float = 60.0) -> None:
        await asyncio.gather(*(pool.ready(timeout_s) for pool in self._pools.values()))

    async def execute(self, request: ExecRequest, session_key: str | None = None) -> ExecResult:
        """Run one request; session_key=None is session "call", else session "run"."""
        if self._closed:
            raise SandboxError("the sandbox manager is closed")
        if not self._started:
            await self.start()
        if request.language not in self.config.images:
            raise InvalidRequestError("language", f"{request.language} is not served here")
        check_ceiling(request.limits, self.config.limit_ceiling)
        self.stats.calls += 1
        if session_key is not None:
            return await self._execute_in_session(request, session_key)
        container = await self._acquire(request)
        try:
            return await container.run(request)
        finally:
            self._discard(container)

    def session_id(self, request: ExecRequest, session_key: str) -> SessionKey:
        """A session's container is one per isolation setting: a `network: false`
        call never runs in the container of a `network: true` one."""
        shape = self._shape(request.language, request.limits, network=request.network)
        return (session_key, shape.key())

    async def _execute_in_session(self, request: ExecRequest, session_key: str) -> ExecResult:
        key = self.session_id(request, session_key)
        lock = self._session_locks.setdefault(key, asyncio.Lock())
        async with lock:
            container = self._sessions.get(key)
            if container is not None and not container.alive():
                # Killed outside any call (by hand, the engine): say so, never
                # carry on silently in a fresh interpreter.
                del self._sessions[key]
                self._discard(container)
                raise SessionLostError(
                    "the run's sandbox session was lost: its container stopped between "
                    "calls; the next call starts a fresh session"
                )
            if container is None:
                container = await self._acquire(request)
                self._sessions[key] = container
            try:
                result = await container.run(request, session=True)
            finally:
                if not container.usable and self._sessions.get(key) is container:
                    del self._sessions[key]
                    self._discard(container)
            return result

    async def close_session(self, session_key: str) -> None:
        """Destroy the session's containers (every language); unknown keys are fine."""
        for key in [key for key in self._sessions if key[0] == session_key]:
            container = self._sessions.pop(key)
            self._session_locks.pop(key, None)
            self._discard(container)
        await self._drain()

    async def aclose(self) -> None:
        """Remove every container this manager created; idempotent."""
        if self._closed:
            return
        self._closed = True
        for task in (self._reaper, self._keeper):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await asyncio.gather(*(pool.aclose() for pool in self._pools.values()))
        for container in self._sessions.values():
            self._discard(container)
        self._sessions.clear()
        await self._drain()
        # Belt and braces: anything still labelled as ours (a start that raced the close).
        leftovers = await self.backend.list({LABEL_MANAGER: self.instance_id})
        await asyncio.gather(*(self.backend.remove(container) for container in leftovers))
        with contextlib.suppress(Exception):  # a store that is down: the record expires
            await self.liveness.forget(self.instance_id)

    def _shape(self, language: Language, limits: Limits, *, network: bool) -> Shape:
        return Shape(language, self.config.images[language], limits, network)

    async def _acquire(self, request: ExecRequest) -> SandboxContainer:
        shape = self._shape(request.language, request.limits, network=request.network)
        pool = self._pools.get(shape.key())
        if pool is not None:
            container = pool.take()
            if container is not None:
                self.stats.warm_starts += 1
                return container
        if not self._capacity.try_acquire():
            # Idle pool containers of other shapes are worth less than a waiting call.
            for other in self._pools.values():
                if other is not pool and other.evict_one():
                    break
            if not await self._capacity.acquire(self.config.admission_timeout_s):
                raise CapacityError(
                    f"all {self.config.max_containers} sandbox containers are busy; none "
                    f"freed up within {self.config.admission_timeout_s:g} s"
                )
        self.stats.cold_starts += 1
        return await self._spawn(shape)

    async def _spawn(self, shape: Shape) -> SandboxContainer:
        """Start a container in a slot already reserved; free the slot if that fails."""
        try:
            return await SandboxContainer.start(
                self.backend,
                shape,
                labels={**self.labels, LABEL_LANGUAGE: shape.language},
                user=self.config.user,
                network_name=self.config.network_name,
                ready_timeout_s=self.config.ready_timeout_s,
            )
        except BaseException:
            self._slot_freed()
            raise

    def _discard(self, container: SandboxContainer) -> None:
        """Destroy in the background; the slot is freed once the container is gone."""
        container.usable = False
        task = asyncio.get_running_loop().create_task(self._destroy(container))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _destroy(self, container: SandboxContainer) -> None:
        try:
            await container.destroy()
        except Exception as exc:
            log.warning("sandbox container %s: removal failed: %s", container.id[:12], exc)
        finally:
            self._slot_freed()

    def _slot_freed(self) -> None:
        self._capacity.release()
        if not self._closed:
            for pool in self._pools.values():
                pool.refill()

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _reap_idle_sessions(self) -> None:
        timeout_s = self.config.session_idle_timeout_s
        while True:
            await asyncio.sleep(min(timeout_s / 2, 30.0))
            cutoff = time.monotonic() - timeout_s
            for key, container in list(self._sessions.items()):
                lock = self._session_locks.get(key)
                if container.last_used < cutoff and not (lock is not None and lock.locked()):
                    log.info("closing idle sandbox session %s", key[0])
                    del self._sessions[key]
                    self._session_locks.pop(key, None)
                    self._discard(container)
