"""The embedded Redis (`memory://`): fakeredis in this process, reached without a wire.

fakeredis is a server behind a socket-like object: redis-py packs each command
into RESP bytes, fakeredis parses them back, and every EVALSHA hashes the
script again, hands its source to Lua again (parse and compile, every call),
checks Lua's globals before each `redis.call`, and forces a full Lua garbage
collection. agentq's transitions are a dozen scripts run thousands of times,
so that plumbing, not the commands, dominated the embedded mode's CPU.

Here, without patching fakeredis:

- the connection hands each command's arguments straight to the server's
  command dispatch and takes the reply off its queue (no RESP either way, no
  parser generator, no wait on an event when the reply is already there; the
  commands behind a blocking one wait as arguments too), and that dispatch is the
  command's `script_calls.ScriptCommand`, worked out once per server;
- a script is compiled once, by SHA, and run as a cached Lua function; the
  forced full collection is left to Lua's own incremental collector;
- `redis.call` from a script dispatches without the per-call check of Lua's
  globals (agentq's scripts are its own; the check after each script stays, walked
  in Lua), through a dispatch worked out once per command
  (`script_calls.ScriptCommand`), and `cjson` skips that check too;
- `redis.pcall`'s error is a Lua string, as Redis gives it;
- a blocked reader (BLPOP, XREAD BLOCK) is woken only by a write to a key its
  command names, and directly when that write runs on its own event loop, not
  through a cross-thread wake-up.

Everything else (commands, replies, errors, KEYS/ARGV, `cjson`) stays
fakeredis's own.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from typing import Any

from fakeredis import FakeServer
from fakeredis import _msgs as msgs
from fakeredis._clients._async import FakeAsyncRedisConnection, FakeReader, FakeWriter
from fakeredis._commands import COMMANDS_WITH_SUB
from fakeredis._core import Database
from fakeredis._helpers import NoResponse, SimpleError, decode_command_bytes
from fakeredis._socket import AsyncFakeSocket
from fakeredis.commands_mixins.scripting_mixin import (
    LUA_MODULE,
    _convert_redis_arg,
    _ensure_str,
    _get_lua_bad_command_arg_msg,
)

from agentq.orchestrator.redis.script_calls import ScriptCommand, install_cjson, lua_args, to_lua

# fakeredis's per-call cleanup; Lua's incremental collector does this as it allocates.
_FULL_COLLECTION = "collectgarbage()"  # as fakeredis's EVAL passes it: text, not bytes
# The globals a script left that the runtime did not start with (nil if none). `pairs`
# and the globals table are the runtime's own, whatever a script rebinds.
_UNEXPECTED_GLOBALS = b"""
function(expected)
  local pairs, globals = pairs, _G
  return function()
    local found
    for name in pairs(globals) do
      if not expected[name] then
        found = found or {}
        found[#found + 1] = name
      end
    end
    return found
  end
end
"""

# Redis 7's shebang line (`#!lua flags=...`): its flags, as Redis names them.
_SHEBANG_FLAGS = frozenset(
    {b"no-writes", b"allow-oom", b"allow-stale", b"no-cluster", b"allow-cross-slot-keys"}
)


def _without_shebang(code: bytes) -> bytes:
    """A script's source with its shebang line, if any, checked as Redis 7 checks it and
    left blank (so error lines count as Redis counts them). fakeredis hands `#!lua` to
    Lua, which refuses it: a script declaring its flags would fail on the embedded Redis
    alone. The flags decide what a real Redis refuses (over maxmemory, on a replica, in
    a cluster); the embedded Redis has none of those, and does not refuse a write from a
    `no-writes` script."""
    if not code.startswith(b"#!"):
        return code
    line, newline, body = code.partition(b"\n")
    engine, *options = line.split()
    if engine != b"#!lua":
        raise SimpleError(f"Unexpected engine in script shebang: {line.decode(errors='replace')}")
    for option in options:
        name, _, value = option.partition(b"=")
        if name != b"flags":
            raise SimpleError(f"Unknown lua shebang option: {option.decode(errors='replace')}")
        for flag in filter(None, value.split(b",")):
            if flag not in _SHEBANG_FLAGS:
                raise SimpleError(
                    f"Unexpected flag in script shebang: {flag.decode(errors='replace')}"
                )
    return newline + body


class CompiledScripts:
    """A fakeredis Lua runtime whose `execute` runs a script compiled once per source,
    and the commands its scripts call, each looked up once (`ScriptCommand`)."""

    def __init__(self, runtime: Any, expected_globals: set[Any]) -> None:
        self.lua = runtime  # fakeredis's own runtime
        self._compiled: dict[bytes | str, Any] = {}
        # A command's name as a script wrote it -> its dispatch, on this server.
        self.commands: dict[bytes, ScriptCommand] = {}
        expected = runtime.table_from(dict.fromkeys(expected_globals, True))
        self._unexpected_globals = runtime.eval(_UNEXPECTED_GLOBALS)(expected)

    def check_globals(self) -> None:
        """fakeredis's `_check_for_lua_globals`, walked in Lua: from Python, each of
        Lua's ~40 globals crossed into a Python set after every script."""
        unexpected = self._unexpected_globals()
        if unexpected is not None:
            names = ", ".join(_ensure_str(name, "utf-8", "replace") for name in unexpected.values())
            raise SimpleError(msgs.GLOBAL_VARIABLE_MSG.format(names))

    def function(self, code: bytes | str) -> Any:
        function = self._compiled.get(code)
        if function is None:
            # A syntax error raises here, as `execute` would, and nothing is cached.
            function = self.lua.compile(_without_shebang(code) if isinstance(code, bytes) else code)
            self._compiled[code] = function
        return function

    def execute(self, code: bytes | str) -> Any:
        if code == _FULL_COLLECTION:
            return None
        return self.function(code)()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lua, name)


class _NamedWakeDatabase(Database):
    """fakeredis's database, where a write to a key wakes only the blocked commands that
    name it among their arguments (a superset of the keys they wait on): fakeredis wakes
    every blocked command on every write, and each looks again (a step made ~130 writes
    while a worker's BLPOP and a client's XREAD waited). `wake_all` (CLIENT UNBLOCK)
    still wakes every one."""

    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock)
        self._names: dict[Callable[[], None], frozenset[bytes]] = {}

    def wake_on(self, callback: Callable[[], None], names: frozenset[bytes]) -> None:
        self.add_change_callback(callback)
        self._names[callback] = names

    def remove_change_callback(self, callback: Callable[[], None]) -> None:
        super().remove_change_callback(callback)
        self._names.pop(callback, None)

    def notify_watch(self, key: bytes) -> None:
        for sock in self._watches.get(key, ()):
            sock.notify_watch()
        condition = self.condition
        if condition._waiters:  # type: ignore[attr-defined]  # a no-op with none waiting
            condition.notify_all()
        names = self._names
        for callback in self._change_callbacks:
            named = names.get(callback)
            if named is None or key in named:
                callback()


class MemoryServer(FakeServer):
    """fakeredis's server, with databases that wake a blocked command only for a write
    to a key it names."""

    def __init__(self) -> None:
        super().__init__()
        self.dbs = defaultdict(lambda: _NamedWakeDatabase(self.lock))
        # A command's name as a client sent it -> its dispatch (None: fakeredis's path).
        self.commands: dict[bytes, ScriptCommand | None] = {}


class _Commands(list[list[bytes]]):
    """Commands as their encoded arguments, what `MemoryConnection` sends instead of RESP."""


class MemorySocket(AsyncFakeSocket):
    """fakeredis's socket, on a server whose Lua runtime caches compiled scripts and
    whose `redis.call` skips the per-call globals check; it takes commands as their
    arguments (`process`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Commands that came while a blocking one held this connection, in order.
        self._pending: deque[list[bytes]] = deque()
        self._fields: list[bytes] = []  # the command being run

    def _process_command(self, fields: list[bytes]) -> None:
        """fakeredis's, through the command's `ScriptCommand` (its name and signature
        read once per server) when nothing but running it is asked: not inside MULTI,
        not a transaction's own command, not one with a subcommand."""
        self._fields = fields  # what a blocking command names (`_blocking`)
        command = self._direct(fields[0]) if fields and not self._queueing else None
        if command is None:
            super()._process_command(fields)
            return
        server = self._server
        result: Any
        try:
            server.acl.validate_command(self._client_info.user, self._client_info, fields)
            with server.lock:
                closed = server.closed_sockets
                while closed:
                    sock = closed.pop()()
                    if sock:
                        sock._cleanup(server)
                now = time.time()
                for db in server.dbs.values():
                    db.time = now
                result = command.run(self, fields[1:])
        except SimpleError as exc:
            result = exc
        result = self._decode_result(result)
        suppressed = self._reply_off or self._reply_skip
        self._reply_skip, self._reply_skip_next = self._reply_skip_next, False
        if suppressed or isinstance(result, NoResponse):
            return
        self.put_response(result)

    def _direct(self, name: bytes) -> ScriptCommand | None:
        """The dispatch of a command a client sent, or None for fakeredis's own path."""
        commands = getattr(self._server, "commands", None)
        if commands is None:
            return None
        try:
            return commands[name]  # type: ignore[no-any-return]
        except KeyError:
            pass
        cmd = decode_command_bytes(name)
        if cmd in COMMANDS_WITH_SUB or self._server.server_type != "redis":
            commands[name] = None
            return None
        try:
            _, sig = self._name_to_func(cmd)
        except SimpleError:
            return None  # unknown: fakeredis's path words the error
        func = getattr(type(self), sig.func_name, None)
        if func is None or msgs.FLAG_TRANSACTION in sig.flags:
            commands[name] = None
            return None
        command = commands[name] = ScriptCommand(func, sig, in_script=False)
        return command

    def process(self, fields: list[bytes]) -> None:
        """Run a command, or keep it for when the blocking command before it ends (as
        fakeredis's parser keeps a socket's bytes, less their RESP)."""
        if self._paused:
            self._pending.append(fields)
        else:
            self._process_command(fields)

    def resume(self) -> None:
        self._paused = False
        pending = self._pending
        while pending and not self._paused:
            self._process_command(pending.popleft())
        if not self._paused:
            self._parser.send(b"")  # bytes sent as RESP (not by `MemoryConnection`)

    def _get_server_runtime(self, server: Any) -> Any:
        runtime = super()._get_server_runtime(server)
        if not isinstance(runtime, CompiledScripts):
            runtime = CompiledScripts(runtime, server._lua_expected_globals)
            server._lua_runtime = runtime
            _install_calls(server, runtime)
        return runtime

    def evalsha(self, sha1: bytes, numkeys: int, *keys_and_args: bytes) -> Any:
        """fakeredis's EVAL less its per-call work: no SHA of the source, no full GC."""
        try:
            script = self._server.script_cache[sha1]
        except KeyError:
            raise SimpleError(msgs.NO_MATCHING_SCRIPT_MSG) from None
        if numkeys > len(keys_and_args) or numkeys < 0:
            return self.eval(script, numkeys, *keys_and_args)  # its own error replies
        runtime = self._get_server_runtime(self._server)
        server: Any = self._server
        server._lua_current_socket[0] = self
        self._script_resp = 2
        caller_fieldsets, self._fieldsets = self._fieldsets, {}
        server._lua_set_keys_argv(
            runtime.lua.table_from(keys_and_args[:numkeys]),
            runtime.lua.table_from(keys_and_args[numkeys:]),
        )
        try:
            result = runtime.function(script)()
        except SimpleError as exc:  # as fakeredis's EVAL words it
            message = exc.value
            if message == msgs.LUA_COMMAND_ARG_MSG:
                message = _get_lua_bad_command_arg_msg(self._server.server_type, self.version)
            elif self.version < (7,):
                message = msgs.SCRIPT_ERROR_MSG.format(sha1.decode(), message)
            raise SimpleError(message) from None
        except LUA_MODULE.LuaError as exc:
            raise SimpleError(msgs.SCRIPT_ERROR_MSG.format(sha1.decode(), exc)) from None
        finally:
            self._script_resp = None
            self._fieldsets = caller_fieldsets
        runtime.check_globals()
        return self._convert_lua_result(result, nested=False)

    def _keyspace_notifications(self, command_items: list[Any], event: bytes) -> None:
        # fakeredis publishes keyspace events whenever anyone subscribes to anything;
        # Redis only when `notify-keyspace-events` asks for them (off by default).
        flags = self._server.config.get(b"notify-keyspace-events", b"")
        if flags and (b"K" in flags or b"E" in flags):
            super()._keyspace_notifications(command_items, event)

    def lua_call(self, runtime: CompiledScripts, op: bytes, args: tuple[Any, ...]) -> Any:
        """`redis.call` from a script: fakeredis's, less the globals check, through the
        command's `ScriptCommand`."""
        command = runtime.commands.get(op)
        if command is not None:
            return to_lua(self, runtime.lua, command.run(self, lua_args(args)))
        cmd = decode_command_bytes(op)
        sub = cmd in COMMANDS_WITH_SUB
        if sub and args:
            cmd += " " + decode_command_bytes(_convert_redis_arg(args[0]))
            args = args[1:]
        func, sig = self._name_to_func(cmd)
        if func is None:
            raise SimpleError(msgs.WRONG_ARGS_MSG7)
        if sub or self._server.server_type == "dragonfly":
            result = self._run_command(func, sig, lua_args(args), True)
            return self._convert_redis_result(runtime.lua, result)
        command = runtime.commands[op] = ScriptCommand(getattr(type(self), sig.func_name), sig)
        return to_lua(self, runtime.lua, command.run(self, lua_args(args)))

    def _blocking(
        self,
        timeout: float | None,
        func: Callable[[bool], Any],
        shape: Callable[[Any], Any] | None = None,
    ) -> Any:
        # fakeredis's, with a wake-up that sets the event directly from its own loop.
        loop = asyncio.get_running_loop()
        ret = func(True)
        if ret is not None or self._in_transaction:
            return ret if shape is None else shape(ret)
        event = asyncio.Event()
        owner = threading.get_ident()

        def callback() -> None:
            if threading.get_ident() == owner:
                event.set()
            else:
                loop.call_soon_threadsafe(event.set)

        db = self._db
        if isinstance(db, _NamedWakeDatabase):
            db.wake_on(callback, frozenset(self._fields[1:]))
        else:
            db.add_change_callback(callback)
        self._blocked = True
        self.pause()
        self._waiting = loop.create_task(
            self._async_blocking(timeout, func, event, callback, shape)
        )
        return NoResponse()


def _install_calls(server: Any, runtime: CompiledScripts) -> None:
    """Point the scripts' `redis.call` and `redis.pcall` at `MemorySocket.lua_call`,
    and `cjson` at `script_calls`'s."""
    current = server._lua_current_socket
    commands, lua = runtime.commands, runtime.lua

    def call(op: bytes, *args: Any) -> Any:
        # `lua_call`, with a known command's dispatch inlined: a script's ~80 calls a
        # step each saved two Python frames.
        command = commands.get(op)
        if command is None:
            return current[0].lua_call(runtime, op, args)
        sock = current[0]
        result = command.run(sock, [a if type(a) is bytes else _convert_redis_arg(a) for a in args])
        kind = type(result)
        if kind is bytes or kind is int:
            return result  # as `to_lua` gives them
        return to_lua(sock, lua, result)

    def pcall(op: bytes, *args: Any) -> Any:
        try:
            return call(op, *args)
        except Exception as exc:
            # A Lua string, as Redis gives: fakeredis's Python str is a userdata whose
            # text, once Lua no longer collects fully after each script, can read as an
            # earlier error's.
            return runtime.lua.table_from({b"err": str(exc).encode()})

    redis_table = runtime.globals()[b"redis"]
    redis_table[b"call"] = call
    redis_table[b"pcall"] = pcall
    install_cjson(runtime.lua)


def _as_bytes(field: Any) -> bytes:
    return bytes(field) if isinstance(field, memoryview) else field


class MemoryConnection(FakeAsyncRedisConnection):
    """A connection to an in-process fakeredis server (`MemorySocket`): commands go to
    the server as their arguments, replies come back as objects."""

    async def _connect(self) -> None:
        if self._server is None or not self._server.connected:
            raise self._connection_error_class(msgs.CONNECTION_ERROR_MSG)
        sock = MemorySocket(
            self._server,
            self.db,
            client_class=self._client_class,
            lua_modules=self._lua_modules,
            client_info=self._client_info,
        )
        self._sock = sock
        self._reader = FakeReader(sock)
        self._writer = FakeWriter(sock)

    def _fields(self, args: Iterable[Any]) -> list[bytes]:
        """A command's arguments as the server reads them (redis-py's packing, less RESP)."""
        args = tuple(args)
        if isinstance(args[0], str):
            args = tuple(args[0].encode().split()) + args[1:]
        elif b" " in args[0]:
            args = tuple(args[0].split()) + args[1:]
        encoder = self.encoder
        encode: Any = encoder.encode
        encoding, errors = encoder.encoding, encoder.encoding_errors
        # redis-py's `Encoder.encode`, a call only for what is neither bytes nor str.
        return [
            field
            if type(field) is bytes
            else field.encode(encoding, errors)
            if type(field) is str
            else _as_bytes(encode(field))
            for field in args
        ]

    def pack_command(self, *args: Any) -> Any:
        return _Commands([self._fields(args)])

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> Any:
        return _Commands(self._fields(args) for args in commands)

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not isinstance(command, _Commands):
            await super().send_packed_command(command, check_health)
            return
        if not self.is_connected:
            await self.connect()  # type: ignore[no-untyped-call]
        sock: Any = self._sock
        if sock is None or sock._server is None or not sock._server.connected or sock._killed:
            raise self._connection_error_class(msgs.CONNECTION_ERROR_MSG)
        for fields in command:
            sock.process(fields)

    async def can_read_destructive(self) -> bool:
        return self._sock is not None and not self._sock.responses.empty()

    async def _read_response(self, **kwargs: Any) -> Any:
        sock = self._sock
        if sock is not None and self._server is not None and self._server.connected:
            try:
                return sock.responses.get_nowait()
            except asyncio.QueueEmpty:
                pass
        return await super()._read_response(**kwargs)
