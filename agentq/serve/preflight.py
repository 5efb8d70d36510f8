"""What `agentq serve` checks before it listens: that no fleet of another run-state
layout works on its Redis (orchestrator/fleet/layout_guard.py). A server writes run
state as a worker does (a submit, an approval, a cancel), so one of another release
beside the fleet would corrupt runs the same way.

A Redis that does not answer yet is the caller's to judge (`agentq serve` starts
without it when nothing else it needs at start is kept there)."""

from __future__ import annotations

import asyncio

from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.fleet import layout_guard
from agentq.orchestrator.fleet.layout import this_layout
from agentq.orchestrator.redis.connect import connect, is_memory_url
from agentq.orchestrator.redis.faults import is_transient_redis

THIS = "this server"
ANSWER_S = 5.0  # beyond the connect timeout, for the check's few commands


async def check_layout(redis_url: str, settings: Settings) -> str | None:
    """Raise `MixedFleetError` if the fleet on `redis_url` is of another layout; why,
    when Redis did not answer (the check not made), else None."""
    if is_memory_url(redis_url):
        return None  # this process's own Redis: no fleet of another release is on it
    redis = connect(redis_url, settings)
    try:
        # Bounded as a first contact is: a Redis that takes TCP and never answers.
        async with asyncio.timeout(settings.redis_connect_timeout_s + ANSWER_S):
            await layout_guard.check(redis, this_layout(), THIS)
    except TimeoutError:
        return "no answer in time"
    except Exception as exc:
        if not is_transient_redis(exc):
            raise
        return str(exc).rstrip(".")
    finally:
        await redis.aclose()
    return None
