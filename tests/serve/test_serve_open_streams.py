"""The open streams and waits a process holds: each limit named, every slot given back."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator

import pytest

from agentq.serve.errors import ApiError
from agentq.serve.limits import OpenStreams

pytestmark = pytest.mark.unit


async def one() -> AsyncIterator[int]:
    yield 1


def refused_by(streams: OpenStreams, tenant: str) -> str | None:
    try:
        streams.open(tenant)
    except ApiError as exc:
        return f"{exc.status} {exc.limit}"
    streams.close(tenant)
    return None


def test_each_tenant_has_its_share_and_the_process_its_total() -> None:
    streams = OpenStreams(total=3, per_tenant=2)
    streams.open("a")
    streams.open("a")
    assert refused_by(streams, "a") == "429 streams_per_tenant"
    streams.open("b")
    assert refused_by(streams, "c") == "429 max_streams"
    streams.close("a")
    assert refused_by(streams, "c") is None


def test_a_stream_gives_its_slot_back_however_it_ends() -> None:
    streams = OpenStreams(total=10, per_tenant=1)

    async def scenario() -> None:
        finished = streams.holding("a", one())
        assert [x async for x in finished] == [1]
        assert refused_by(streams, "a") is None
        never_started = streams.holding("a", one())  # its client left before it began
        assert refused_by(streams, "a") == "429 streams_per_tenant"
        del never_started
        gc.collect()
        assert refused_by(streams, "a") is None
        with streams.held("a"):
            assert refused_by(streams, "a") == "429 streams_per_tenant"
        assert refused_by(streams, "a") is None

    asyncio.run(scenario())


def test_a_slot_taken_before_acting_is_given_back_unless_a_stream_holds_it() -> None:
    streams = OpenStreams(total=10, per_tenant=1)

    async def scenario() -> None:
        with streams.slot("a"):  # the handler answered without a stream (a 204, a 409)
            assert refused_by(streams, "a") == "429 streams_per_tenant"
        assert refused_by(streams, "a") is None
        with streams.slot("a") as slot:
            body = slot.stream(one())
        assert refused_by(streams, "a") == "429 streams_per_tenant"  # the stream holds it
        assert [x async for x in body] == [1]
        assert refused_by(streams, "a") is None

    asyncio.run(scenario())
