"""Waiting on a condition instead of sleeping: `eventually(check, what, timeout_s)`.

`check` is polled every `interval_s` until its value is truthy (or satisfies `until`),
and that value is returned; past the deadline the test fails naming `what` and the
last value seen. An exception from `check` ends the wait at once (a process that
exited, say).

    spans = eventually(receiver.received, "two spans", until=lambda s: len(s) >= 2)
    await eventually_async(lambda: marker.exists(), "the call to start")
    stats = await eventually_async(own.stats, "the counter to move")

`eventually` blocks (for sync tests and fixtures); `eventually_async` takes a sync
or an async check and yields to the event loop between polls.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

TIMEOUT_S = 30.0
INTERVAL_S = 0.05


class GaveUp(AssertionError):
    """A condition that did not hold in time."""


def _gave_up(what: str, timeout_s: float, last: Any) -> GaveUp:
    shown = repr(last)
    if len(shown) > 2000:
        shown = shown[:2000] + "…"
    return GaveUp(f"gave up after {timeout_s:g} s waiting for {what}; last saw: {shown}")


def eventually(
    check: Callable[[], T],
    what: str,
    timeout_s: float = TIMEOUT_S,
    interval_s: float = INTERVAL_S,
    *,
    until: Callable[[T], object] = bool,
) -> T:
    """The first value of `check()` that is truthy (or satisfies `until`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if until(value):
            return value
        if time.monotonic() >= deadline:
            raise _gave_up(what, timeout_s, value)
        time.sleep(interval_s)


@overload
async def eventually_async(
    check: Callable[[], Awaitable[T]],
    what: str,
    timeout_s: float = ...,
    interval_s: float = ...,
    *,
    until: Callable[[T], object] = ...,
) -> T: ...


@overload
async def eventually_async(
    check: Callable[[], T],
    what: str,
    timeout_s: float = ...,
    interval_s: float = ...,
    *,
    until: Callable[[T], object] = ...,
) -> T: ...


async def eventually_async(
    check: Callable[[], Any],
    what: str,
    timeout_s: float = TIMEOUT_S,
    interval_s: float = INTERVAL_S,
    *,
    until: Callable[[Any], object] = bool,
) -> Any:
    """`eventually` for async tests: the check may be a coroutine function."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if until(value):
            return value
        if time.monotonic() >= deadline:
            raise _gave_up(what, timeout_s, value)
        await asyncio.sleep(interval_s)
