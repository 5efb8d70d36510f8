"""An event's sequence number is its stream id, numbered by Redis (`XADD key 0-*`, one
command: machine/lua/emit.lua) with no counter beside the stream; a run's last number is
read from the stream (RunStore.head). On the real redis-server and the embedded
(memory://, fakeredis) one alike: contiguous from 1, a batch numbered in order, and on
after a trim (Redis keeps a stream's last id through XTRIM and XDEL)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import pytest

from agentq.orchestrator.client import Client
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.errors import RunNotFoundError
from agentq.orchestrator.runs.state.status import MetaField
from tests.support.redis_cluster import LocalCluster
from tests.support.specs import scripted

pytestmark = pytest.mark.integration


@pytest.fixture(params=["redis", "memory"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    url = (
        request.getfixturevalue("redis_url")
        if request.param == "redis"
        else f"memory://event-numbers-{uuid.uuid4().hex}"
    )
    async with Client(url) as opened:
        yield opened


def _event(run_id: str, n: int) -> str:
    return json.dumps(
        {
            "type": "tool-progress",
            "run_id": run_id,
            "at": 0,
            "tool_call_id": "c",
            "tool_name": "t",
            "output": str(n),
        }
    )


async def _seqs(client: Client, run_id: str) -> list[int]:
    return [e.seq async for e in client.runs.events(run_id)]


async def test_events_are_numbered_from_one_without_a_counter(client: Client) -> None:
    run_id = await client.runs.submit(scripted({"text": "done"}))  # no worker: it waits
    assert (await client.runs.status(run_id)).seq == 1  # its `start` event
    assert await client.runs.store.emit(run_id, [_event(run_id, 1)]) == 2
    # A batch is numbered in order, and the reply is its last number.
    assert await client.runs.store.emit(run_id, [_event(run_id, n) for n in (2, 3, 4)]) == 5
    assert await _seqs(client, run_id) == [1, 2, 3, 4, 5]
    assert (await client.runs.status(run_id)).seq == 5
    meta = await client.runs.store.meta(run_id)
    assert "seq" not in meta  # the stream is the count


async def test_numbers_go_on_after_the_stream_is_trimmed(client: Client) -> None:
    run_id = await client.runs.submit(scripted({"text": "done"}))
    await client.runs.store.emit(run_id, [_event(run_id, n) for n in range(4)])  # 2..5
    await client.redis.xtrim(keys.events(run_id), maxlen=2, approximate=False)
    assert (await client.runs.status(run_id)).seq == 5  # the last event is still there
    assert await client.runs.store.emit(run_id, [_event(run_id, 6)]) == 6
    assert await _seqs(client, run_id) == [4, 5, 6]
    # Trimmed empty: the last number is not readable (0), the next is still last + 1,
    # and a reader following from 0 misses nothing.
    await client.redis.xtrim(keys.events(run_id), maxlen=0, approximate=False)
    head = await client.runs.status(run_id)
    assert head.seq == 0
    assert await client.runs.store.emit(run_id, [_event(run_id, 7)]) == 7
    assert [e.seq async for e in client.runs.events(run_id, after=head.seq)] == [7]


async def test_head_reads_the_meta_and_the_last_number_together(client: Client) -> None:
    run_id = await client.runs.submit(scripted({"text": "done"}))
    await client.runs.store.emit(run_id, [_event(run_id, 1)])
    meta, seq = await client.runs.store.head(run_id, [MetaField.STATUS, "no-such-field"])
    assert (meta, seq) == ({MetaField.STATUS: "running"}, 2)
    whole, seq = await client.runs.store.head(run_id)
    assert (whole[MetaField.STATUS], MetaField.SPEC in whole, seq) == ("running", True, 2)
    with pytest.raises(RunNotFoundError):
        await client.runs.store.head("no-such-run")
    with pytest.raises(RunNotFoundError):
        await client.runs.store.head("no-such-run", [MetaField.STATUS])


@pytest.mark.cluster
async def test_a_run_on_a_cluster_reads_its_last_number_in_its_slot(
    cluster: LocalCluster,
) -> None:
    async with Client(cluster.url) as on_cluster:
        run_id = await on_cluster.runs.submit(scripted({"text": "done"}))
        assert await on_cluster.runs.store.emit(run_id, [_event(run_id, 1)]) == 2
        head = await on_cluster.runs.status(run_id)
        assert (head.status, head.seq) == ("running", 2)
