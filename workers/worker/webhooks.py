"""Delivering runs' events to their webhooks, from any worker.

A run with webhooks is listed in `aq:webhook-runs` when it is submitted. Each worker's
dispatcher looks at the list; one worker at a time takes a run (a lock key with a TTL,
renewed while it delivers, so a dead worker's runs are taken up by another) and walks
its events in order. Per webhook a cursor in Redis records the last event settled
(delivered, or given up on): a worker that dies mid-delivery leaves the cursor before
that event, which is delivered again (at least once, in order). A delivery is retried
with backoff on timeouts, transport errors, 408, 429 and 5xx; when the last attempt
fails, or the receiver refuses, a `webhook-failed` event is added to the run (even an
ended one) and the next event goes on. Nothing here can fail a run.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping

import httpx
from redis.asyncio import Redis

from agentq.orchestrator.core.errors import RunNotFoundError, ToolError
from agentq.orchestrator.core.events import Event, event_json
from agentq.orchestrator.core.keys import WEBHOOK_RUNS, meta, webhook_cursors, webhook_lock
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.machine import scripts
from agentq.orchestrator.policy.endpoints import Resolver
from agentq.orchestrator.policy.signing import signed_headers
from agentq.orchestrator.policy.webhooks import WebhookSpec, webhook_hosts
from agentq.orchestrator.redis.faults import is_transient, raise_if_cancel_requested
from agentq.orchestrator.runs.result import TERMINAL_STATUSES
from agentq.orchestrator.runs.state import Emit, MetaField
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools.base import STORED_SPEC
from agentq.workers.queue.liveness import OUTAGE, RENEW
from agentq.workers.tools.egress import EgressRefused, GuardedHttp

log = logging.getLogger("agentq.webhooks")

LOCK_MS = 30_000
# A listed run that does not exist (its submit failed after listing it) is dropped
# after this long.
MISSING_GRACE_S = 60.0
MAX_BACKOFF_S = 60.0
# Runs one worker delivers for at once; the others wait for another worker or a slot.
MAX_RUNS_PER_WORKER = 64
_RETRY_STATUSES = frozenset({408, 429})

_RELEASE = scripts.script("agentq.workers.worker", "release")


# Receivers have always been sent these on every event, null where the type has none.
_ALWAYS = dict.fromkeys(("seq", "type", "run_id", "at", "step", "tool_call_id", "tool_name"))


def webhook_body(event: Event) -> bytes:
    """The POSTed body: the event's fields as stored (nulls included), ASCII JSON."""
    shown = {**_ALWAYS, **event.model_dump(mode="json", exclude_unset=True)}
    return json.dumps(shown, separators=(",", ":")).encode()


async def undelivered(redis: Redis) -> list[str]:
    """The runs whose webhooks still have events to settle, oldest first."""
    listed = await redis.zrange(WEBHOOK_RUNS, 0, -1)
    return [raw.decode() if isinstance(raw, bytes) else str(raw) for raw in listed]


class _Failed(Exception):
    def __init__(self, why: str, attempts: int) -> None:
        super().__init__(why)
        self.why, self.attempts = why, attempts


class WebhookDispatcher:
    def __init__(
        self,
        redis: Redis,
        store: RunStore,
        worker_id: str,
        *,
        settings: Settings | None = None,
        env: Mapping[str, str] | None = None,
        resolve: Resolver | None = None,
        poll_s: float = 0.5,
        idle_poll_s: float | None = None,
        busy: Callable[[], bool] = lambda: True,
    ) -> None:
        self.redis = redis
        self.store = store
        self.worker_id = worker_id
        self.settings = settings or Settings()
        self.env = dict(env or {})
        self.resolve = resolve
        self.poll_s = poll_s
        # The look's period while nothing is listed and this process runs no job (`busy`):
        # a run submitted then is listed before its first job runs, here or elsewhere.
        self.idle_poll_s = poll_s if idle_poll_s is None else max(poll_s, idle_poll_s)
        self.busy = busy
        self._renew = redis.register_script(RENEW)
        self._release = redis.register_script(_RELEASE)
        self._runs: dict[str, asyncio.Task[None]] = {}

    async def run_forever(self) -> None:
        try:
            while True:
                raise_if_cancel_requested()  # a cancel redis-py's timeout swallowed
                listed = True
                try:
                    listed = await self._take_runs()
                    OUTAGE.succeeded()
                except Exception as exc:
                    if not is_transient(exc):
                        log.exception("webhook dispatcher: looking for runs failed")
                    else:
                        await asyncio.sleep(OUTAGE.failed(exc))
                await asyncio.sleep(self.next_look_s(listed))
        finally:
            for task in self._runs.values():
                task.cancel()

    def next_look_s(self, listed: bool) -> float:
        """How long until the next look: `poll_s` while runs are listed (or the look
        failed), this process delivers for some or runs a job (its run may have
        webhooks: `busy`), else `idle_poll_s` (an idle worker's one look a second)."""
        if listed or self._runs or self.busy():
            return self.poll_s
        return self.idle_poll_s

    async def _take_runs(self) -> bool:
        """Take up listed runs nobody delivers for (three round trips, whatever the list);
        say whether any run was listed."""
        room = MAX_RUNS_PER_WORKER - len(self._runs)
        if room <= 0:
            return True
        listed = await self.redis.zrange(WEBHOOK_RUNS, 0, 999, withscores=True)
        listed_ids = [
            (run_id, float(added))
            for raw, added in listed
            if (run_id := raw.decode() if isinstance(raw, bytes) else str(raw)) not in self._runs
        ]
        if not listed_ids:
            return bool(listed)
        # Only runs nobody holds: those another worker serves must not use up our room.
        async with self.redis.pipeline(transaction=False) as pipe:
            for run_id, _ in listed_ids:
                pipe.exists(webhook_lock(run_id))
            held = await pipe.execute()
        candidates = [c for c, h in zip(listed_ids, held, strict=True) if not h][:room]
        if not candidates:
            return True
        async with self.redis.pipeline(transaction=False) as pipe:
            for run_id, _ in candidates:
                pipe.set(webhook_lock(run_id), self.worker_id, nx=True, px=LOCK_MS)
            taken = await pipe.execute()
        for (run_id, added), ok in zip(candidates, taken, strict=True):
            if ok:
                task = asyncio.create_task(self._serve(run_id, added))
                self._runs[run_id] = task
                task.add_done_callback(functools.partial(self._forget, run_id))
        return True

    def _forget(self, run_id: str, _: asyncio.Task[None]) -> None:
        self._runs.pop(run_id, None)

    async def _serve(self, run_id: str, added: float) -> None:
        try:
            await self._deliver_run(run_id, added)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the lock lapses; this or another worker tries again
            log.warning("webhooks of run %s: %s", run_id, exc)
            return
        finally:
            try:
                await self._release(keys=[webhook_lock(run_id)], args=[self.worker_id])
            except Exception as exc:
                log.debug("releasing the webhook lock of %s: %s", run_id, exc)

    async def _deliver_run(self, run_id: str, added: float) -> None:
        try:
            fields = await self.store.meta(run_id)
        except RunNotFoundError:
            if time.time() - added > MISSING_GRACE_S:
                await self.redis.zrem(WEBHOOK_RUNS, run_id)
            return
        spec = RunSpec.model_validate_json(fields[MetaField.SPEC], context=STORED_SPEC)
        hooks = spec.webhooks
        raw = await self.redis.hgetall(webhook_cursors(run_id))  # type: ignore[misc]
        cursors = {int(k): int(v) for k, v in raw.items()}
        while True:
            after = min((cursors.get(i, 0) for i in range(len(hooks))), default=0)
            ended = await self._status(run_id) in TERMINAL_STATUSES
            delivered_any = False
            async for event in self.store.events(run_id, after=after):
                delivered_any = True
                for i, hook in enumerate(hooks):
                    if event.seq <= cursors.get(i, 0):
                        continue
                    if hook.selects(event.type):
                        await self._settle(run_id, hook, event)
                    cursors[i] = event.seq
                    await self.redis.hset(  # type: ignore[misc]
                        webhook_cursors(run_id), str(i), str(event.seq)
                    )
                await self._hold(run_id)
            if ended and not delivered_any:
                await self.redis.zrem(WEBHOOK_RUNS, run_id)
                return
            if not delivered_any:
                await asyncio.sleep(self.poll_s)
                await self._hold(run_id)

    async def _status(self, run_id: str) -> str:
        status = await self.redis.hget(meta(run_id), MetaField.STATUS)  # type: ignore[misc]
        return status.decode() if isinstance(status, bytes) else str(status)

    async def _hold(self, run_id: str) -> None:
        renewed = await self._renew(keys=[webhook_lock(run_id)], args=[self.worker_id, LOCK_MS])
        if not renewed:
            raise RuntimeError("the webhook lock lapsed; another worker takes over")

    async def _settle(self, run_id: str, hook: WebhookSpec, event: Event) -> None:
        """Deliver one event, or record that it could not be."""
        try:
            await self.deliver(run_id, hook, event)
        except _Failed as failed:
            log.warning(
                "webhook %s gave up on event %d of run %s: %s",
                hook.url,
                event.seq,
                run_id,
                failed.why,
            )
            await self.store.append(
                Emit(
                    run_id=run_id,
                    after_end=True,
                    events=[
                        event_json(
                            "webhook-failed",
                            run_id,
                            url=hook.url,
                            event_seq=event.seq,
                            event_type=event.type,
                            attempts=failed.attempts,
                            error=failed.why,
                        )
                    ],
                )
            )

    async def deliver(self, run_id: str, hook: WebhookSpec, event: Event) -> None:
        body = webhook_body(event)
        secret: str | None = None
        if hook.secret_env is not None:
            secret = self.env.get(hook.secret_env)
            if not secret:
                raise _Failed(f"{hook.secret_env} is not set on the worker", 0)
        attempts = self.settings.webhook_max_attempts
        why = ""
        guard = GuardedHttp(webhook_hosts(self.settings), resolve=self.resolve)
        try:
            for attempt in range(1, attempts + 1):
                headers = {
                    "content-type": "application/json",
                    "X-Agentq-Event": event.type,
                    "X-Agentq-Delivery": f"{run_id}:{event.seq}",
                    **(signed_headers(secret, body) if secret else {}),
                }
                try:
                    fetched = await guard.send(
                        "POST",
                        hook.url,
                        headers=headers,
                        content=body,
                        timeout_s=self.settings.webhook_timeout_s,
                        max_bytes=4096,
                    )
                except EgressRefused as exc:
                    raise _Failed(exc.message, attempt) from None
                except (httpx.HTTPError, ToolError) as exc:
                    why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                else:
                    if 200 <= fetched.status < 300:
                        return
                    why = f"HTTP {fetched.status}"
                    if fetched.status not in _RETRY_STATUSES and fetched.status < 500:
                        raise _Failed(why, attempt)
                if attempt < attempts:
                    await self._hold(run_id)
                    await asyncio.sleep(
                        min(MAX_BACKOFF_S, self.settings.webhook_backoff_s * 2 ** (attempt - 1))
                    )
        finally:
            await guard.aclose()
        raise _Failed(why, attempts)
