"""The embedded Redis (`memory://`): fakeredis, with Lua scripts compiled once.

fakeredis runs every EVAL/EVALSHA by handing the script's source to Lua again
(`LuaRuntime.execute`: parse and compile, every call) and then forces a full Lua
garbage collection (`collectgarbage()`). agentq's transitions are a dozen
scripts run thousands of times, so that work dominated the embedded mode's CPU.
Here the server's Lua runtime is wrapped once: a script is compiled on first use
and its compiled function cached by source, and the forced full collection is
left to Lua's own incremental collector (which runs as scripts allocate).

Everything else (the `redis` and `cjson` globals, KEYS/ARGV, replies and errors)
stays fakeredis's own: the wrapper only changes how a script's source becomes a
function. It is applied through the connection class, not by patching fakeredis.
"""

from __future__ import annotations

from typing import Any

from fakeredis._clients._async import FakeAsyncRedisConnection, FakeReader, FakeWriter
from fakeredis._msgs import CONNECTION_ERROR_MSG
from fakeredis._socket import AsyncFakeSocket

# fakeredis's per-call cleanup; Lua's incremental collector does this as it allocates.
_FULL_COLLECTION = b"collectgarbage()"


class CompiledScripts:
    """A fakeredis Lua runtime whose `execute` runs a script compiled once per source."""

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime
        self._compiled: dict[bytes, Any] = {}

    def execute(self, code: bytes) -> Any:
        if code == _FULL_COLLECTION:
            return None
        function = self._compiled.get(code)
        if function is None:
            # A syntax error raises here, as `execute` would, and nothing is cached.
            function = self._runtime.compile(code)
            self._compiled[code] = function
        return function()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


class CompiledScriptsSocket(AsyncFakeSocket):
    """fakeredis's socket, on a server whose Lua runtime caches compiled scripts."""

    def _get_server_runtime(self, server: Any) -> Any:
        runtime = super()._get_server_runtime(server)
        if not isinstance(runtime, CompiledScripts):
            runtime = CompiledScripts(runtime)
            server._lua_runtime = runtime
        return runtime


class MemoryConnection(FakeAsyncRedisConnection):
    """A connection to an in-process fakeredis server, through `CompiledScriptsSocket`
    (fakeredis's own `_connect`, with that socket class)."""

    async def _connect(self) -> None:
        if self._server is None or not self._server.connected:
            raise self._connection_error_class(CONNECTION_ERROR_MSG)
        sock = CompiledScriptsSocket(
            self._server,
            self.db,
            client_class=self._client_class,
            lua_modules=self._lua_modules,
            client_info=self._client_info,
        )
        self._sock = sock
        self._reader = FakeReader(sock)
        self._writer = FakeWriter(sock)
