"""Push delivery of a remote queue's calls to the webhook the deployment configured.

The pusher is one more lease holder (see `remote_leases`): it leases a call, POSTs the
lease document signed (`orchestrator.signing`), and retries with backoff on a timeout,
a transport error, 408, 429 or 5xx, heartbeating the lease meanwhile. A 2xx with a
JSON body `{"output", "is_error"?}` is the result; a 202 means the receiver keeps the
lease and reports on `/v1/leases/{id}/heartbeat|progress|result` itself (else the lease
lapses and the call is pushed again). Another 4xx, or the last attempt failing, is a
tool error the model sees: a webhook that is down does not stall the run forever.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any

import httpx

from agentq.orchestrator.policy.signing import signed_headers
from agentq.orchestrator.redis.faults import is_transient
from agentq.orchestrator.tools.remote import PushWebhook
from agentq.workers.queue.liveness import OUTAGE
from agentq.workers.tools.remote import Lease, LeaseGone, QueueHolder, RemoteLeases

log = logging.getLogger("agentq.remote")

_RETRY_STATUSES = frozenset({408, 429})
MAX_BACKOFF_S = 60.0


def retryable(status: int) -> bool:
    return status in _RETRY_STATUSES or status >= 500


def backoff_s(hook: PushWebhook, attempt: int) -> float:
    """The wait after failed attempt `attempt` (1-based)."""
    return float(min(MAX_BACKOFF_S, hook.backoff_s * 2 ** (attempt - 1)))


class _Outcome:
    """What one push came to: a result to record, or the receiver kept the lease."""

    def __init__(self, output: Any = None, is_error: bool = False, kept: bool = False) -> None:
        self.output, self.is_error, self.kept = output, is_error, kept


class PushDispatcher:
    def __init__(
        self,
        leases: RemoteLeases,
        queue: str,
        hook: PushWebhook,
        http: httpx.AsyncClient,
        env: Mapping[str, str],
        *,
        lease_s: float = 60.0,
    ) -> None:
        self.leases = leases
        self.queue = queue
        self.hook = hook
        self.http = http
        self.env = env
        self.lease_s = max(lease_s, hook.timeout_s * 2)
        self.holder = QueueHolder(queue)
        self._tasks: set[asyncio.Task[None]] = set()

    async def run_forever(self) -> None:
        while True:
            free = self.hook.concurrency - len(self._tasks)
            if free <= 0:
                await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
                continue
            try:
                taken = await self.leases.lease(
                    self.queue, free, 10.0, self.lease_s, holder=self.holder
                )
            except Exception as exc:
                if not is_transient(exc):
                    log.exception("leasing calls of queue %s to push failed", self.queue)
                await asyncio.sleep(OUTAGE.failed(exc))
                continue
            OUTAGE.succeeded()
            for lease in taken:
                task = asyncio.create_task(self._deliver(lease))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _deliver(self, lease: Lease) -> None:
        try:
            outcome = await self.push(lease)
            if not outcome.kept:
                await self.leases.complete(
                    lease.id, outcome.output, outcome.is_error, holder=self.holder
                )
        except LeaseGone as exc:
            log.info(
                "push of %s: lease %s ended before its result was recorded (%s)",
                lease.tool,
                lease.id,
                type(exc).__name__,
            )
        except Exception:
            log.exception("push of %s to queue %s failed", lease.tool, self.queue)

    async def push(self, lease: Lease) -> _Outcome:
        secret = self.env.get(self.hook.secret_env)
        if not secret:
            return _Outcome(
                f"the webhook of queue {self.queue!r} cannot be signed: "
                f"{self.hook.secret_env} is not set where agentq serve runs",
                is_error=True,
            )
        body = json.dumps(lease.document(), separators=(",", ":")).encode()
        why = ""
        for attempt in range(1, self.hook.max_attempts + 1):
            headers = {"content-type": "application/json", **signed_headers(secret, body)}
            try:
                response = await self.http.post(
                    self.hook.url, content=body, headers=headers, timeout=self.hook.timeout_s
                )
            except httpx.HTTPError as exc:
                why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if response.status_code == 202:
                    return _Outcome(kept=True)
                if response.is_success:
                    return _reply(response)
                why = f"HTTP {response.status_code}"
                if not retryable(response.status_code):
                    return _Outcome(f"the webhook refused the call ({why})", is_error=True)
            if attempt < self.hook.max_attempts:
                await self.leases.heartbeat(lease.id, self.lease_s, holder=self.holder)
                await asyncio.sleep(backoff_s(self.hook, attempt))
        return _Outcome(
            f"the webhook failed {self.hook.max_attempts} time(s), last: {why}", is_error=True
        )


def _reply(response: httpx.Response) -> _Outcome:
    """A synchronous result: `{"output", "is_error"?}`; any other JSON is the output."""
    try:
        data = response.json()
    except ValueError:
        return _Outcome(response.text)
    if isinstance(data, dict) and "output" in data:
        return _Outcome(data["output"], bool(data.get("is_error", False)))
    return _Outcome(data)
