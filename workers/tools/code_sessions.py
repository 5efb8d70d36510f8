"""Sandbox ownership and run sessions across a fleet of sandbox workers, on Redis.

Two things the sandbox package cannot know alone (it imports nothing of agentq):

- Ownership. `RedisLiveness` implements the sandbox's `Liveness` with one key
  per manager instance and a TTL: a worker removes another's containers only
  once that key has expired, so starting a worker never kills a live call.
  The deployment's identity (`fleet_id`, made once and kept in its Redis)
  labels every container, so a worker sweeps only its own deployment's
  containers: another deployment on the same engine keeps its liveness
  records in another Redis, where they would all look expired.
- Run sessions. A `session: "run"` container lives in one worker's manager,
  but any sandbox worker may take the run's next call. `SessionRouter` records
  in Redis which manager holds each (run, container shape); the worker that
  takes a call runs it itself if it holds the session (or claims it if nobody
  does), forwards it to the holder's own inbox if the holder is alive, and
  otherwise fails the call with `SessionLostError`: the model hears that the
  session was lost, and the next call starts a fresh one. A call never runs
  silently in a new interpreter.

The keys are this module's own (not the run store's): `aq:sandbox:fleet` (the
deployment's id), `aq:sandbox:owner:{id}` (liveness), `aq:sandbox:sessions:{run}`
(hash: shape digest -> owner), `aq:sandbox:inbox:{owner}` (forwarded calls),
`aq:sandbox:reply:{token}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import uuid
from collections.abc import Collection
from typing import Any

from redis.asyncio import Redis

from agentq.orchestrator.machine import scripts
from agentq.sandbox import (
    ExecRequest,
    ExecResult,
    SandboxError,
    SandboxManager,
    SessionLostError,
)

log = logging.getLogger(__name__)

FLEET_KEY = "aq:sandbox:fleet"
OWNER_KEY = "aq:sandbox:owner:{}"
SESSIONS_KEY = "aq:sandbox:sessions:{}"
INBOX_KEY = "aq:sandbox:inbox:{}"
REPLY_KEY = "aq:sandbox:reply:{}"
_POLL_S = 1  # BLPOP timeout: how often a waiting worker re-checks the holder is alive
_REPLY_TTL_S = 120
# Time beyond the call's own timeout a forwarded call may take (admission, a cold start).
_FORWARD_SLACK_S = 90.0

_FORGET_IF = scripts.script("agentq.workers.tools", "forget_if")


async def fleet_id(redis: Redis) -> str:
    """This deployment's identity: the first sandbox worker on a Redis makes it."""
    await redis.set(FLEET_KEY, f"fleet-{uuid.uuid4().hex}", nx=True)
    return _text(await redis.get(FLEET_KEY))


class RedisLiveness:
    """`Liveness` on Redis: an owner is alive while its key exists."""

    def __init__(self, redis: Redis, fleet: str) -> None:
        self.redis = redis
        self.fleet = fleet

    async def beat(self, owner: str, ttl_s: float) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(OWNER_KEY.format(owner), "1", px=max(1, int(ttl_s * 1000)))
            # A Redis that lost its data gets the same identity back from the live
            # workers, so a worker started after that still sweeps their orphans.
            pipe.set(FLEET_KEY, self.fleet, nx=True)
            await pipe.execute()

    async def gone(self, owners: Collection[str]) -> set[str]:
        ordered = list(owners)
        async with self.redis.pipeline(transaction=False) as pipe:
            for owner in ordered:
                pipe.exists(OWNER_KEY.format(owner))
            found = await pipe.execute()
        return {owner for owner, exists in zip(ordered, found, strict=True) if not exists}

    async def forget(self, owner: str) -> None:
        await self.redis.delete(OWNER_KEY.format(owner))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SessionRouter:
    """Runs each session call on the worker that holds the session's container."""

    def __init__(self, redis: Redis, manager: SandboxManager, liveness: RedisLiveness) -> None:
        self.redis = redis
        self.manager = manager
        self.liveness = liveness
        self.owner = manager.instance_id
        self._forget_if = redis.register_script(_FORGET_IF)
        self._server: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = asyncio.get_running_loop().create_task(self._serve_inbox())

    async def execute(self, request: ExecRequest, run_id: str) -> ExecResult:
        key = SESSIONS_KEY.format(run_id)
        shape = self.manager.session_id(request, run_id)[1]
        field = hashlib.sha256(repr(shape).encode()).hexdigest()[:24]
        ttl_s = int(self.manager.config.session_idle_timeout_s) + 60
        claimed = await self.redis.hsetnx(key, field, self.owner)  # type: ignore[misc]
        await self.redis.expire(key, ttl_s)
        owner = self.owner if claimed else _text(await self.redis.hget(key, field))  # type: ignore[misc]
        if owner == self.owner:
            return await self.manager.execute(request, run_id)
        if owner in await self.liveness.gone([owner]):
            await self._forget_if(keys=[key], args=[field, owner])
            raise SessionLostError(
                "the run's sandbox session was lost: the worker holding it stopped; "
                "the next call starts a fresh session"
            )
        return await self._forward(owner, request, run_id)

    async def _forward(self, owner: str, request: ExecRequest, run_id: str) -> ExecResult:
        token = uuid.uuid4().hex
        log.info("session call of run %s forwarded to sandbox owner %s", run_id, owner)
        message = {
            "reply": token,
            "session": run_id,
            "request": request.model_dump(mode="json"),
        }
        inbox = INBOX_KEY.format(owner)
        await self.redis.rpush(inbox, json.dumps(message))  # type: ignore[misc]
        await self.redis.expire(inbox, _REPLY_TTL_S)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.limits.timeout_s + _FORWARD_SLACK_S
        reply_key = REPLY_KEY.format(token)
        while True:
            popped = await self.redis.blpop([reply_key], timeout=_POLL_S)  # type: ignore[misc]
            if popped:
                return _reply_result(json.loads(popped[1]))
            if owner in await self.liveness.gone([owner]):
                raise SessionLostError(
                    "the run's sandbox session was lost: the worker holding it stopped "
                    "during the call; the next call starts a fresh session"
                )
            if loop.time() > deadline:
                raise SandboxError("the worker holding the run's sandbox session did not answer")

    async def _serve_inbox(self) -> None:
        inbox = INBOX_KEY.format(self.owner)
        while True:
            try:
                popped = await self.redis.blpop([inbox], timeout=_POLL_S)  # type: ignore[misc]
            except Exception as exc:  # Redis restarting (redis-py's errors are not OSErrors)
                log.warning("sandbox session inbox: %s", exc)
                await asyncio.sleep(_POLL_S)
                continue
            if popped:
                task = asyncio.get_running_loop().create_task(self._handle(popped[1]))
                self._handlers.add(task)
                task.add_done_callback(self._handlers.discard)

    async def _handle(self, raw: bytes) -> None:
        message = json.loads(raw)
        reply: dict[str, Any]
        try:
            request = ExecRequest(**message["request"])
            result = await self.manager.execute(request, str(message["session"]))
            reply = {"result": result.model_dump(mode="json")}
        except SandboxError as exc:
            reply = {"error": exc.message, "lost": isinstance(exc, SessionLostError)}
        except Exception as exc:
            log.exception("forwarded sandbox call failed")
            reply = {"error": f"{type(exc).__name__}: {exc}", "lost": False}
        reply_key = REPLY_KEY.format(message["reply"])
        try:
            await self.redis.rpush(reply_key, json.dumps(reply))  # type: ignore[misc]
            await self.redis.expire(reply_key, _REPLY_TTL_S)
        except Exception as exc:  # the caller stops waiting at its deadline
            log.warning("sandbox session reply lost: %s", exc)

    async def release(self, run_id: str) -> None:
        await self.manager.close_session(run_id)
        await self.redis.delete(SESSIONS_KEY.format(run_id))

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._server
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)


def _reply_result(reply: dict[str, Any]) -> ExecResult:
    if "result" in reply:
        return ExecResult.model_validate(reply["result"])
    message = str(reply.get("error", "the forwarded call failed"))
    raise SessionLostError(message) if reply.get("lost") else SandboxError(message)
