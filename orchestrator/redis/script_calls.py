"""`redis.call` from a script on the embedded Redis, each command's dispatch worked out once.

A transition's script makes ~130 `redis.call`s per step, and fakeredis spends most of
each one around the command rather than in it: it parses the command's name, rebuilds
the list of argument types from the signature, walks the arguments twice, reads its
flags from sets, and checks the reply's shape. `ScriptCommand` does that work once per
command name and argument count and keeps the rest in fakeredis's order: arity, the
arguments' conversions and a missing key's short cut in argument order, the keys' types,
then the script and pub/sub refusals, the command's own function (fakeredis's), the RESP2
shaping, the keys' write-back and the notifications. Replies and errors are fakeredis's
(tests/orchestrator/redis/test_core_script_calls.py runs every command agentq's scripts
call both ways and compares). The write-back is fakeredis's too, with a key the
command only read left alone (fakeredis's `writeback` does nothing for it either) and a
written one stored without the generic mapping's `setdefault`/`pop`; the subkey
notifications run when a hash or an event is there to look at.

`cjson.decode` and `cjson.encode` are fakeredis's, less their check of Lua's globals,
and `cjson.decode` reads with orjson what orjson reads as json does.

What this leaves to fakeredis's generic path (`BaseFakeSocket._run_command`): a server
that is not a Redis (Dragonfly's script rules differ) and commands with a subcommand.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import orjson
from fakeredis import _msgs as msgs
from fakeredis._command_args_parsing import Float
from fakeredis._commands import Key, Signature
from fakeredis._core import CommandItem
from fakeredis._core._database import Item
from fakeredis._helpers import SimpleError, SimpleString
from fakeredis._socket._base import BaseFakeSocket
from fakeredis._socket._resp import convert_to_resp2, valid_response_type
from fakeredis.commands_mixins.scripting_mixin import (
    _cjson_lua_to_python,
    _cjson_python_to_lua,
    _convert_redis_arg,
    _lua_cjson_null,
)
from fakeredis.model import Hash

# orjson reads an integer outside -2**63 .. 2**64 - 1 as a float, of at least this size.
_ROUNDED = 2.0**63
# Replies that RESP2 shaping and the reply check leave as they are, and Lua takes as is.
_LEAF = frozenset((bytes, int, type(None)))
_PUBSUB_COMMANDS = BaseFakeSocket.ACCEPTED_COMMANDS_WHILE_PUBSUB


class _Shape:
    """One argument count's work: `steps`, Signature.apply's first pass in argument
    order (`(index, Key, None)` for a key with a reply of its own when missing,
    `(index, None, decode)` for an argument to convert); `keys`, its second pass, each
    `(index, the type its value must have or None, what makes a missing one or None)`."""

    __slots__ = ("keys", "steps")

    def __init__(self, sig: Signature, count: int, create: bool) -> None:
        # fakeredis types these as classes; a key's entry is a `Key` marker.
        types: list[Any] = list(sig.fixed)
        types.extend(sig.repeat[i % len(sig.repeat)] for i in range(count - len(types)))
        steps: list[tuple[int, Key | None, Any]] = []
        keys: list[tuple[int, Any, Any]] = []
        for i, kind in enumerate(types):
            if isinstance(kind, Key):
                of = kind.type_
                keys.append((i, of, of if create and of is not None and of is not bytes else None))
                if kind.missing_return is not Key.UNSPECIFIED:
                    steps.append((i, kind, None))
            elif kind is not bytes:
                steps.append((i, None, kind.decode))
        self.steps = tuple(steps)
        self.keys = tuple(keys)


class ScriptCommand:
    """A command as a script calls it (or, `in_script=False`, as a client sends it):
    its function and signature, read once."""

    __slots__ = (
        "_shapes",
        "create",
        "func",
        "name",
        "name_bytes",
        "no_script",
        "remove_empty",
        "sig",
        "to_resp2",
    )

    def __init__(self, func: Any, sig: Signature, in_script: bool = True) -> None:
        self.func = func  # unbound: the socket class's own method
        self.sig = sig
        self.name = sig.name
        self.name_bytes = sig.name.encode()
        self.no_script = in_script and msgs.FLAG_NO_SCRIPT in sig.flags
        self.to_resp2 = msgs.FLAG_SKIP_CONVERT_TO_RESP2 not in sig.flags
        self.remove_empty = msgs.FLAG_LEAVE_EMPTY_VAL not in sig.flags
        self.create = msgs.FLAG_DO_NOT_CREATE not in sig.flags
        self._shapes: dict[int, _Shape] = {}

    def _shape(self, count: int, version: Any) -> _Shape:
        shape = self._shapes.get(count)
        if shape is None:
            self.sig.check_arity(range(count), version)  # raises fakeredis's arity error
            shape = self._shapes[count] = _Shape(self.sig, count, self.create)
        return shape

    def run(self, sock: Any, args: list[Any]) -> Any:
        """`BaseFakeSocket._run_command(func, sig, args, from_script=in_script)` on a
        server that is not a Dragonfly."""
        items: list[CommandItem] = []
        sock._subkey_events = []
        try:
            result = self._apply(sock, args, items)
        except SimpleError as exc:
            result = exc
        if items:
            remove_empty = self.remove_empty
            hashes = False  # the subkey notifications look at hashes' expired fields
            for item in items:
                if item._modified:
                    _write_back(item, remove_empty)
                elif item._expireat_modified:
                    item.writeback(remove_empty_val=remove_empty)
                # (an item neither modified nor re-timed writes nothing back)
                hashes = hashes or isinstance(item._value, Hash)
            sock._keyspace_notifications(items, self.name_bytes)
            if hashes or sock._subkey_events:
                sock._subkey_notifications(items)
        elif sock._subkey_events:  # with neither, both notifications are no-ops
            sock._keyspace_notifications(items, self.name_bytes)
            sock._subkey_notifications(items)
        return result

    def _apply(self, sock: Any, args: list[Any], items: list[CommandItem]) -> Any:
        """The command's reply; `items` gets its keys once the command runs (a refused
        command writes nothing back, as in fakeredis)."""
        db = sock._db
        shape = self._shapes.get(len(args)) or self._shape(len(args), sock._server.version)
        short: tuple[Any] | None = None
        for i, missing, decode in shape.steps:
            if missing is None:
                args[i] = decode(args[i])
            elif _stored(db, args[i]) is None:
                short = (missing.missing_return,)
                break
        read: list[CommandItem] = []
        if short is None:
            stored, now = db._dict, db.time
            for i, of, make in shape.keys:
                arg = args[i]
                found = stored.get(arg)  # `_stored`, inline: a key's expiry drops it
                if found is not None and found.expireat is not None and found.expireat < now:
                    del stored[arg]
                    found = None
                if found is None:
                    item = CommandItem(arg, db, None, default=None if make is None else make())
                elif of is not None and type(found.value) is not of:
                    raise SimpleError(msgs.WRONGTYPE_MSG)
                else:
                    item = CommandItem(arg, db, found)
                args[i] = item
                read.append(item)
        if self.no_script:
            raise SimpleError(msgs.COMMAND_IN_SCRIPT_MSG)
        if sock._pubsub and self.name not in _PUBSUB_COMMANDS:
            raise SimpleError(msgs.BAD_COMMAND_IN_PUBSUB_MSG)
        if short is not None:
            return short[0]
        items += read
        result = self.func(sock, *args)
        kind = type(result)
        if kind in _LEAF or (kind is list and all(type(item) in _LEAF for item in result)):
            return result  # as RESP2 shaping and the reply check leave it, in either protocol
        if kind is SimpleString:  # OK: the same, and at the top level it is a valid reply
            return result
        resp = sock._resp_version
        if resp == 2 and self.to_resp2:
            result = convert_to_resp2(result, sock._server.server_type)
        if self.to_resp2 and not valid_response_type(result, resp):
            raise AssertionError(f"Invalid response type for {result}")
        return result


def _write_back(item: CommandItem, remove_empty: bool) -> None:
    """`CommandItem.writeback` of a modified item, without its property reads and the
    generic mapping's `setdefault` and `pop` (each a KeyError raised and caught on a new
    or missing key): the same watches told, key dropped, or value and expiry stored."""
    db: Any = item.db
    key = item.key
    db.notify_watch(key)
    value = item._value
    if not isinstance(value, bytes) and (value is None or (not value and remove_empty)):
        db._dict.pop(key, None)  # `db.pop(key, None)`: gone either way, expired or not
        return
    stored = _stored(db, key)  # `db.setdefault(key, Item(None))`, which drops an expired one
    if stored is None:
        stored = db._dict[key] = Item(None)  # no expiry yet: nothing to schedule
    expireat = item._expireat
    stored.value = value
    stored.expireat = expireat
    if expireat is not None:
        db.schedule_expiry(key, expireat)


def _stored(db: Any, key: bytes) -> Any:
    """`db.get(key)` (an expired key is dropped as it is read), without the KeyError that
    `Mapping.get` raises and catches for each missing key."""
    found = db._dict.get(key)
    if found is not None and found.expireat is not None and found.expireat < db.time:
        del db._dict[key]
        return None
    return found


def lua_args(args: tuple[Any, ...]) -> list[bytes]:
    """A script's arguments as fakeredis reads them (a number as Redis formats it)."""
    return [arg if type(arg) is bytes else _convert_redis_arg(arg) for arg in args]


def to_lua(sock: Any, runtime: Any, result: Any) -> Any:
    """`ScriptingCommandsMixin._convert_redis_result` on a server that is not a Dragonfly:
    a command's reply as the script sees it (a flat list of strings, integers and nils
    in one step, a nil as false)."""
    kind = type(result)
    if kind is bytes or kind is int:
        return result
    if result is None:
        return False
    if kind is list and all(type(item) in _LEAF for item in result):
        return runtime.table_from([False if item is None else item for item in result])
    if kind is float and sock._resp_version != 3:
        return Float.encode(result, humanfriendly=False)
    if kind is SimpleString:
        return runtime.table_from({b"ok": result.value})
    return sock._convert_redis_result(runtime, result)


# `cjson.decode` and `cjson.encode`: fakeredis's, less the check of Lua's globals on
# each call (it stays after each script, as for `redis.call`). Named and shaped as
# fakeredis's, so that a script calling one with the wrong arguments reads the same error.
def _lua_cjson_decode(lua_runtime: Any, expected_globals: None, json_str: Any) -> Any:
    value = _decoded(json_str)
    if isinstance(value, (dict, list)):
        value = lua_runtime.table_from(value, recursive=True)
    return value


class _Rounded(Exception):
    """orjson read an integer past 64 bits as a float (json keeps it an integer)."""


def _lua_value(obj: Any) -> Any:
    """fakeredis's `_cjson_python_to_lua` of what orjson read, refusing a float orjson
    may have rounded from an integer (json reads those digits as an int)."""
    kind = type(obj)
    if kind is str:
        return obj.encode()
    if kind is dict:
        return {key.encode(): _lua_value(value) for key, value in obj.items()}
    if kind is list:
        return [_lua_value(item) for item in obj]
    if obj is None:
        return _lua_cjson_null
    if kind is float and abs(obj) >= _ROUNDED:
        raise _Rounded
    return obj


def _decoded(text: Any) -> Any:
    """`_cjson_python_to_lua(json.loads(text))`, read by orjson where it reads the same:
    orjson refuses what json alone accepts (NaN, 1e400, a lone surrogate, a BOM,
    UTF-16), and json then reads it."""
    if type(text) is bytes:
        try:
            return _lua_value(orjson.loads(text))
        except (orjson.JSONDecodeError, _Rounded):
            pass
    return _cjson_python_to_lua(json.loads(text))


def _lua_cjson_encode(lua_runtime: Any, expected_globals: None, value: Any) -> bytes:
    return json.dumps(_cjson_lua_to_python(value), separators=(",", ":")).encode()


def install_cjson(lua_runtime: Any) -> None:
    """Point a runtime's `cjson.decode` and `cjson.encode` at this module's."""
    cjson = lua_runtime.globals()[b"cjson"]
    cjson[b"decode"] = functools.partial(_lua_cjson_decode, lua_runtime, None)
    cjson[b"encode"] = functools.partial(_lua_cjson_encode, lua_runtime, None)
