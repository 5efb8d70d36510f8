"""Request body size (413), per-tenant submit rate (429 + Retry-After), and the open
streams, waits and long-polls a process holds (429), each naming its limit."""

from __future__ import annotations

import contextlib
import json
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentq.orchestrator.runs.api import Runs
from agentq.serve.errors import ApiError, error_body

T = TypeVar("T")


class BodyLimit:
    """ASGI middleware: refuse bodies over their limit (413 naming it), declared or
    streamed. `limits` gives path prefixes limits of their own: name -> bytes."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, larger: dict[str, tuple[str, int]] | None = None
    ) -> None:
        self.app = app
        self.default = ("max_body_bytes", max_bytes)
        self.larger = larger or {}  # path prefix -> (its limit's name, its bytes)

    def _limit(self, path: str) -> tuple[str, int]:
        for prefix, limit in self.larger.items():
            if path == prefix or path.startswith(prefix + "/"):
                return limit
        return self.default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        name, limit = self._limit(scope.get("path", ""))
        too_large = ApiError(
            413, "too_large", f"request body over {limit} bytes ({name})", limit=name
        )
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(send, too_large)
            return
        seen = 0

        async def counted() -> Message:
            # Raised where the body is read, an HTTP exception: FastAPI passes it on as
            # it is (a chunked body over the limit is a 413, not a parse error's 400).
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise too_large
            return message

        await self.app(scope, counted, send)

    @staticmethod
    async def _refuse(send: Send, error: ApiError) -> None:
        body = json.dumps(error_body(error.type, error.message, limit=error.limit)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": error.status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def check_submit_rate(runs: Runs, tenant: str) -> None:
    """A one-minute window per tenant, shared by every replica and the workers that start
    its sub-agents (`Runs.count_submission`), at the deployment's AGENTQ_SUBMITS_PER_MINUTE."""
    per_minute = runs.settings.submits_per_minute
    window = await runs.count_submission(tenant)
    if window.count > per_minute:
        raise ApiError(
            429,
            "rate_limited",
            f"tenant {tenant!r} submitted over {per_minute} runs, tool calls, chat turns "
            "and batches this minute",
            headers={"Retry-After": str(window.retry_after_s)},
            limit="submits_per_minute",
        )


async def check_batch_lines(runs: Runs, tenant: str, lines: int, per_minute: int) -> None:
    """The lines of a tenant's batches, in the same one-minute window as submissions."""
    window = await runs.count_submission(tenant, lines, counter="batch-lines")
    if window.count > per_minute:
        raise ApiError(
            429,
            "rate_limited",
            f"tenant {tenant!r} submitted over {per_minute} batch lines this minute",
            headers={"Retry-After": str(window.retry_after_s)},
            limit="batch_lines_per_minute",
        )


def check_spec_size(raw: bytes, max_bytes: int) -> None:
    if len(raw) > max_bytes:
        raise ApiError(
            413,
            "too_large",
            f"run spec over {max_bytes} bytes",
            field="spec",
            limit="max_spec_bytes",
        )


class OpenStreams:
    """What this process holds open for callers (event streams, `?wait=` requests, lease
    long-polls): at most `total`, and at most `per_tenant` for any one tenant, so one
    tenant's followers cannot take every slot the others need."""

    def __init__(self, total: int, per_tenant: int) -> None:
        self.total = total
        self.per_tenant = per_tenant
        self._held: Counter[str] = Counter()

    def open(self, tenant: str) -> None:
        """Take a slot for `tenant`, or 429 naming the limit that is full."""
        if self._held[tenant] >= self.per_tenant:
            raise ApiError(
                429,
                "rate_limited",
                f"tenant {tenant!r} holds {self.per_tenant} open streams and waits",
                limit="streams_per_tenant",
                headers={"Retry-After": "1"},
            )
        if self.held_total() >= self.total:
            raise ApiError(
                429,
                "rate_limited",
                f"this server holds {self.total} open streams and waits",
                limit="max_streams",
                headers={"Retry-After": "1"},
            )
        self._held[tenant] += 1

    def held_total(self) -> int:
        return sum(self._held.values())

    def close(self, tenant: str) -> None:
        self._held[tenant] -= 1
        if self._held[tenant] <= 0:
            del self._held[tenant]

    @contextlib.contextmanager
    def held(self, tenant: str) -> Iterator[None]:
        self.open(tenant)
        try:
            yield
        finally:
            self.close(tenant)

    def holding(self, tenant: str, body: AsyncIterator[T]) -> AsyncIterator[T]:
        """`body`, with a slot taken now (429 here, before a response starts) and given
        back when the stream ends, however it ends: a stream never started (its client
        left first) gives it back when it is collected."""
        self.open(tenant)
        return self._released_after(tenant, body)

    def slot(self, tenant: str) -> Slot:
        """A slot taken now for a stream a handler makes later, after it has acted (a
        chat turn starts a run): the 429 comes before anything is done."""
        self.open(tenant)
        return Slot(self, tenant)

    def _released_after(self, tenant: str, body: AsyncIterator[T]) -> AsyncIterator[T]:
        async def streamed() -> AsyncIterator[T]:
            try:
                async for item in body:
                    yield item
            finally:
                release()

        stream = streamed()
        release = weakref.finalize(stream, self.close, tenant)  # runs once, whichever first
        return stream


class Slot:
    """One open-stream slot, held by a handler until it hands it to the stream it
    answers with (`stream`); given back at the `with` block's end if it never does
    (the handler refused, or answered without a stream)."""

    def __init__(self, streams: OpenStreams, tenant: str) -> None:
        self._streams = streams
        self._tenant = tenant
        self._handed = False

    def stream(self, body: AsyncIterator[T]) -> AsyncIterator[T]:
        """`body`, holding this slot until it ends (as `OpenStreams.holding`)."""
        self._handed = True
        return self._streams._released_after(self._tenant, body)

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if not self._handed:
            self._streams.close(self._tenant)
