"""Commands packed into RESP by hiredis, in C.

redis-py's sync client packs a command with hiredis when hiredis is installed; its
asyncio client (redis-py 5) always packs in Python: an encode, a length and a bytes join
per argument. A transition's EVALSHA carries a dozen keys and its input, and a worker
sends a few of them per job, so that packing was a tenth of a worker's CPU per job.
`hiredis_packed` gives a connection class (plain, TLS, Unix socket or sentinel-managed,
whichever the URL chose) that packs through redis-py's own hiredis serializer: the same
bytes, and the same `DataError` for an argument Redis cannot take (None, a bool).
"""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio.connection import AbstractConnection
from redis.connection import HiredisRespSerializer
from redis.typing import EncodableT

_PACKER = HiredisRespSerializer()


class _HiredisPacking(AbstractConnection):
    def pack_command(self, *args: EncodableT) -> list[bytes]:
        # redis-py annotates each argument as a list; they are a command's arguments.
        return cast(list[bytes], _PACKER.pack(*cast(list[Any], args)))


_PACKED: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def hiredis_packed(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """`connection_class`, packing its commands with hiredis (one class per class, so
    every pool of a process shares it)."""
    packed = _PACKED.get(connection_class)
    if packed is None:
        name = f"Hiredis{connection_class.__name__}"
        packed = _PACKED[connection_class] = type(name, (_HiredisPacking, connection_class), {})
    return packed
