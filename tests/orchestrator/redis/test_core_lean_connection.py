"""Commands are packed into RESP by hiredis on every connection `connect` makes, with the
bytes and errors of redis-py's own packer, whichever transport the URL chose."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.asyncio.sentinel import SentinelManagedConnection
from redis.exceptions import DataError

from agentq.orchestrator.redis.connect import connect
from agentq.orchestrator.redis.lean import lean

pytestmark = pytest.mark.unit

COMMANDS: list[tuple[Any, ...]] = [
    ("EVALSHA", "a" * 40, 2, "aq:run:{r}", "aq:run:{r}:msgs", '{"at":1.5,"text":"é"}'),
    ("ZADD", "aq:queue:model", 1732612345.1234567, b"job"),
    ("SET", "k", 2**70),
    ("CONFIG GET", "maxmemory"),
    ("SET", "k", memoryview(b"bytes")),
    ("SET", "k", "x" * 10_000),  # past redis-py's buffer cutoff: sent in chunks there
]


@pytest.mark.parametrize(
    ("url", "transport"),
    [
        ("redis://127.0.0.1:1/0", Connection),
        ("rediss://127.0.0.1:1/0", SSLConnection),
        ("unix:///tmp/agentq-no-such.sock", UnixDomainSocketConnection),
    ],
)
def test_connect_s_connections_pack_with_hiredis_over_the_url_s_transport(
    url: str, transport: type[Connection]
) -> None:
    connection_class = connect(url).connection_pool.connection_class
    assert connection_class is lean(transport)
    assert issubclass(connection_class, transport)


@pytest.mark.parametrize("command", COMMANDS)
def test_the_bytes_are_redis_py_s(command: tuple[Any, ...]) -> None:
    packed = lean(Connection)()
    assert b"".join(packed.pack_command(*command)) == b"".join(Connection().pack_command(*command))


@pytest.mark.parametrize("bad", [None, True])
def test_an_argument_redis_cannot_take_is_a_data_error(bad: object) -> None:
    with pytest.raises(DataError):
        lean(Connection)().pack_command("SET", "k", bad)  # type: ignore[arg-type]


def test_a_transport_that_reads_replies_its_own_way_reads_every_one_itself() -> None:
    """Sentinel's connection turns a demoted primary's READONLY into a connection error
    (the pool then asks the sentinels for the new one): no reply may skip its read."""
    sentinel: Any = lean(SentinelManagedConnection)
    assert not sentinel._reads_as_base
    for transport in (Connection, SSLConnection, UnixDomainSocketConnection):
        made: Any = lean(transport)
        assert made._reads_as_base
