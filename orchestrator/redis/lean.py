"""The connection class agentq's pools use: redis-py's, with a command's Python work cut.

A worker sends a few commands per job (its transitions' EVALSHAs, each with a dozen keys
and its input, and the claim), so what redis-py does per command in Python is a fixed
share of every job's CPU. Three things here, each the same on the wire as redis-py's own:

- packing in C: redis-py's sync client packs a command with hiredis when hiredis is
  installed; its asyncio client (redis-py 5) always packs in Python, an encode, a length
  and a bytes join per argument. These connections pack through redis-py's own hiredis
  serializer: the same bytes, the same `DataError` for an argument Redis cannot take.
- a write's deadline as `asyncio.timeout`, armed only when the write must wait for the
  socket: redis-py wraps each write in `asyncio.wait_for`, which on Python 3.11 runs it
  in a task of its own, though a command the socket takes at once cannot be late. The
  deadline, and the errors a failed or late write raises, are redis-py's.
- the pool's check that a connection it hands out holds no reply left unread: redis-py
  reads under a zero timeout for it, which costs a scheduled cancellation, a trip
  through the event loop and an exception per command. Nothing buffered and nothing on
  the socket (the common case) is answered here at once; anything else is asked of
  redis-py's own check, which reads it or raises as before.
- a read's deadline, kept without a timer per read: redis-py arms one
  (`asyncio.timeout`: a timer scheduled and cancelled, a cancelled timer left on the
  event loop's heap until popped) around every reply it reads. A reply hiredis has whole
  in its buffer is taken at once (the replies after a pipeline's first mostly are: Redis
  answers a pipeline in one write); a reply waited for notes its deadline on the
  connection, and one timer per connection (`_ReadWatch`), armed when none is, fails the
  read that is still waiting at its deadline and otherwise moves on to the deadline of
  the read of then, or stops when none waits. The same deadline, error and disconnect as
  redis-py's (`TimeoutError("Timeout reading from ...")`); what a reply holds is handled
  as redis-py does (an error reply raised, a connection error disconnecting). A
  transport that reads replies its own way (sentinel's) reads them all as before.

`lean` gives the class for the transport the URL chose (plain, TLS, Unix socket,
sentinel-managed).
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Iterable
from typing import Any, cast

import hiredis
from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis._parsers.socket import SERVER_CLOSED_CONNECTION_ERROR
from redis.asyncio.connection import AbstractConnection
from redis.connection import HiredisRespSerializer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT

_PACKER = HiredisRespSerializer()


class LeanConnection(AbstractConnection):
    """What `lean` adds to a transport's connection class."""

    # Whether the transport reads replies as redis-py's base does: one that reads them its
    # own way (sentinel's turns a demoted primary's READONLY into a connection error, so
    # the pool asks the sentinels again) reads every reply itself (`lean` sets this).
    _reads_as_base = True
    # The read deadline's timer (made at the first read waited for).
    _read_watch: _ReadWatch | None = None
    # The socket's poller of `_nothing_pending`, with the writer it was made for.
    _polled: tuple[asyncio.StreamWriter, select.poll] | None = None

    def pack_command(self, *args: EncodableT) -> list[bytes]:
        name = args[0]
        if type(name) is str and name.isalpha():
            # A one-word command's name (the serializer would split it on spaces, as
            # "CONFIG GET": nothing to split), packed as the serializer packs it.
            try:
                return [hiredis.pack_command(cast(Any, args))]
            except TypeError:
                pass  # the serializer's DataError, below
        # redis-py annotates each argument as a list; they are a command's arguments.
        return cast(list[bytes], _PACKER.pack(*cast(list[Any], args)))

    def pack_commands(self, commands: Iterable[Iterable[EncodableT]]) -> list[bytes]:
        """A pipeline's commands, each packed as above, in one write: the same bytes as
        redis-py's, without its chunking by size (the transport joins them anyway)."""
        return [b"".join([self.pack_command(*command)[0] for command in commands])]

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        """redis-py 5's, but for the deadline (see the module's docstring)."""
        if not self.is_connected:
            await self.connect()  # type: ignore[no-untyped-call]  # redis-py's
        elif (
            check_health
            and self.health_check_interval
            and asyncio.get_running_loop().time() > self.next_health_check
        ):  # (redis-py's check_health's own test, without its call when not due)
            await self.check_health()  # type: ignore[no-untyped-call]
        if isinstance(command, str):
            command = command.encode()
        if isinstance(command, bytes):
            command = [command]
        writer = self._writer
        assert writer is not None  # connected above
        try:
            writer.writelines(command)
            if writer.transport.get_write_buffer_size() == 0:
                # All handed to the socket: flow control cannot hold the drain, so no
                # deadline is armed, and the drain is only asked for the error of a
                # connection lost (a transport then closing: a write to it is dropped).
                if writer.transport.is_closing():
                    await writer.drain()
            else:
                async with asyncio.timeout(self.socket_timeout or None):
                    await writer.drain()
        except TimeoutError:  # before OSError, which it is a kind of
            await self.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as e:
            await self.disconnect(nowait=True)
            err_no, message = ("UNKNOWN", e.args[0]) if len(e.args) == 1 else e.args[:2]
            raise RedisConnectionError(f"Error {err_no} while writing to socket. {message}.") from e
        except BaseException:
            # A write cut short may have sent part of the command: the connection cannot
            # be used again.
            await self.disconnect(nowait=True)
            raise

    async def can_read_destructive(self) -> bool:
        """redis-py's, answered without the event loop when nothing can be there (see the
        module's docstring)."""
        if self._nothing_pending():
            return False
        return cast(bool, await super().can_read_destructive())  # type: ignore[no-untyped-call]

    async def read_response(
        self,
        disable_decoding: bool = False,
        timeout: float | None = None,  # noqa: ASYNC109  # redis-py's signature
        *,
        disconnect_on_error: bool = True,
        push_request: bool | None = False,
    ) -> Any:
        """redis-py's, but a reply already whole in the buffer is taken at once and a reply
        waited for keeps its deadline without a timer of its own (see the module's
        docstring)."""
        parser = self._parser
        reader = getattr(parser, "_reader", None)
        if (
            timeout is not None  # a caller's own wait (pub/sub): None when it passes
            or not self._reads_as_base
            or not isinstance(reader, hiredis.Reader)
            or not getattr(parser, "_connected", False)
        ):
            return await super().read_response(
                disable_decoding,
                timeout,
                disconnect_on_error=disconnect_on_error,
                push_request=push_request,
            )
        try:
            response = reader.gets(False) if disable_decoding else reader.gets()
            if response is NOT_ENOUGH_DATA:
                response = await self._awaited_reply(reader, disable_decoding)
        except _ReadLate:
            if disconnect_on_error:
                await self.disconnect(nowait=True)
            raise RedisTimeoutError(f"Timeout reading from {self._host_error()}") from None
        except OSError as e:
            if disconnect_on_error:
                # Waited, not `nowait`: the transport lost with this error set it on its
                # stream's closed future too, and only a wait for the close reads it there
                # (at once: the future is done). Unread, asyncio logs it as "Future
                # exception was never retrieved" when a garbage-collected cycle (the
                # error's traceback holds the transport) frees the future before its
                # protocol.
                await self.disconnect()
            raise RedisConnectionError(
                f"Error while reading from {self._host_error()} : {e.args}"
            ) from None
        except BaseException:  # a protocol error, a closed connection, a cancel
            if disconnect_on_error:
                await self.disconnect(nowait=True)
            raise
        # What hiredis's parser raises of a reply (redis-py's _AsyncHiredisParser), and
        # then redis-py's read: it disconnects.
        failed = response[0] if isinstance(response, list) and response else response
        if isinstance(failed, RedisConnectionError):
            if disconnect_on_error:
                await self.disconnect(nowait=True)
            raise failed
        if self.health_check_interval:
            self.next_health_check = asyncio.get_running_loop().time() + self.health_check_interval
        if isinstance(response, ResponseError):
            raise response from None
        return response

    async def _awaited_reply(self, reader: hiredis.Reader, disable_decoding: bool) -> Any:
        """The next reply, read from the socket until hiredis has it whole (redis-py's
        `_AsyncHiredisParser.read_response`), under the connection's read deadline."""
        stream = self._reader
        assert stream is not None  # the parser is connected
        parser: Any = self._parser  # redis-py's hiredis parser (checked by the caller)
        size = parser._read_size
        if self.socket_timeout:
            watch = self._read_watch
            if watch is None:
                watch = self._read_watch = _ReadWatch()
            watch.wait(stream, self.socket_timeout)
        try:
            while True:
                data = await stream.read(size)
                if not data or not isinstance(data, bytes):
                    raise RedisConnectionError(SERVER_CLOSED_CONNECTION_ERROR)
                reader.feed(data)
                response = reader.gets(False) if disable_decoding else reader.gets()
                if response is not NOT_ENOUGH_DATA:
                    return response
        finally:
            if self._read_watch is not None:
                self._read_watch.waiting = None

    def _nothing_pending(self) -> bool:
        """Whether the connection surely holds no reply: none parsed and none buffered
        (hiredis's reader, the stream's buffer), the stream open and its socket not
        readable. A TLS stream may hold data its socket does not show: never sure."""
        parsed = getattr(self._parser, "_reader", None)  # hiredis's, once connected
        stream, writer = self._reader, self._writer
        if not isinstance(parsed, hiredis.Reader) or stream is None or writer is None:
            return False
        if parsed.has_data() or getattr(stream, "_buffer", True) or stream.at_eof():
            return False
        polled = self._polled
        if polled is None or polled[0] is not writer:
            sock = writer.get_extra_info("socket")
            if sock is None or writer.get_extra_info("ssl_object") is not None:
                return False
            # poll, not select: a process with a thousand connections has descriptors
            # past select's FD_SETSIZE (1024), where select raises. One poller per
            # socket (a connection's writer is its socket's: a new one on reconnect).
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            polled = self._polled = (writer, poller)
        return not polled[1].poll(0)


class _ReadLate(Exception):
    """A read waited past its deadline (`_ReadWatch`); the read raises redis-py's
    TimeoutError for it."""


class _ReadWatch:
    """A connection's read deadline: the deadline of the read that waits (`waiting`),
    and one timer, armed when none is, that fails that read once its deadline passes.

    A connection reads one reply at a time, so a read that finds the timer armed (for an
    earlier read's deadline, never a later one: each deadline is the socket timeout from
    its read's start) only notes its own; the timer, when it fires, fails the read still
    waiting if its deadline is the one fired for or earlier, moves on to that read's
    deadline if later, and stops when no read waits. A read the socket answered already
    (its waiter done, its task not yet run) is let be: its reply is taken."""

    __slots__ = ("_armed_for", "_timer", "waiting")

    def __init__(self) -> None:
        self.waiting: tuple[float, asyncio.StreamReader] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for = 0.0

    def wait(self, stream: asyncio.StreamReader, timeout: float) -> None:
        """A read of `stream` starts waiting: it must end within `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.waiting = (deadline, stream)
        if self._timer is None:
            self._arm(loop, deadline)

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        self._armed_for = deadline
        self._timer = loop.call_at(deadline, self._fired)

    def _fired(self) -> None:
        self._timer = None
        if self.waiting is None:
            return  # no read waits: the next one arms the timer again
        deadline, stream = self.waiting
        if deadline > self._armed_for:
            self._arm(asyncio.get_running_loop(), deadline)
            return
        # asyncio's StreamReader: `_waiter` is the future a read waits on.
        waiter: asyncio.Future[None] | None = getattr(stream, "_waiter", None)
        if waiter is None or waiter.done():
            # Answered, or between two reads of one reply: checked again at once.
            self._arm(asyncio.get_running_loop(), deadline)
            return
        waiter.set_exception(_ReadLate())


_LEAN: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def lean(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """`connection_class`, packing and sending as above (one class per class, so every
    pool of a process shares it)."""
    made = _LEAN.get(connection_class)
    if made is None:
        reads_as_base = connection_class.read_response is AbstractConnection.read_response
        made = _LEAN[connection_class] = type(
            f"Lean{connection_class.__name__}",
            (LeanConnection, connection_class),
            {"_reads_as_base": reads_as_base},
        )
    return made
