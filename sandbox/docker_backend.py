"""`SandboxBackend` on a Docker engine, through the `docker` SDK.

Blocking SDK calls run in threads (`asyncio.to_thread`); the attached stdio
sockets are read with the event loop's own non-blocking socket calls, so a
waiting call holds no thread. The hardening of every container is decided in
`container_options`, in one place, so it can be read (and tested) at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Mapping, Sequence
from typing import Any, cast

import docker
import docker.errors
from docker.types import LogConfig, Ulimit

from agentq.sandbox.backend import STDERR, STDOUT, ContainerSpec, ContainerState, ExecOutput
from agentq.sandbox.errors import SandboxUnavailableError
from agentq.sandbox.frames import FrameBuffer

_MIB = 1024 * 1024
_HEADER = 8  # Docker's multiplexed-stream frame header: stream, 3 pad bytes, size
_RECV = 262_144
# The OOM killer of the *host* should pick sandboxed code before anything else.
_OOM_SCORE_ADJ = 1000
_HOW_TO_ENABLE = (
    "start the Docker engine (e.g. `dockerd --iptables=false --bridge=none &`) "
    "and build the images with `agentq sandbox build-images`"
)


def _ids(user: str) -> tuple[str, str]:
    uid, _, gid = user.partition(":")
    return uid, gid or uid


def container_options(spec: ContainerSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """(create_container kwargs, create_host_config kwargs) for a hardened container."""
    limits = spec.limits
    uid, gid = _ids(spec.user)
    memory = f"{limits.memory_mb}m"
    create = {
        "image": spec.image,
        "command": list(spec.command),
        "user": spec.user,
        # Only what the spec names: nothing of the host's environment leaks in.
        "environment": dict(spec.env),
        "labels": dict(spec.labels),
        "working_dir": spec.workdir,
        "hostname": "sandbox",
        "stdin_open": True,  # the driver reads its requests on stdin
        "tty": False,
    }
    host: dict[str, Any] = {
        "network_mode": spec.network_name if spec.network else "none",
        "read_only": True,
        "tmpfs": {
            spec.workdir: (
                f"rw,nosuid,nodev,noexec,size={limits.workdir_mb}m,mode=0700,uid={uid},gid={gid}"
            ),
            "/tmp": f"rw,nosuid,nodev,noexec,size={limits.tmp_mb}m,mode=1777",
        },
        "shm_size": f"{limits.shm_mb}m",
        "cap_drop": ["ALL"],
        # The default seccomp profile stays on: setting no seccomp option keeps it.
        "security_opt": ["no-new-privileges"],
        "pids_limit": limits.pids,
        "mem_limit": memory,
        "memswap_limit": memory,  # equal: no swap beyond the memory limit
        "nano_cpus": int(limits.cpus * 1e9),
        "ulimits": [
            Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
            Ulimit(name="fsize", soft=limits.workdir_mb * _MIB, hard=limits.workdir_mb * _MIB),
            Ulimit(name="core", soft=0, hard=0),
        ],
        "init": True,  # reaps zombies, forwards signals
        "oom_score_adj": _OOM_SCORE_ADJ,
        # The driver's stdout carries the code's output: never let the daemon
        # write it to the host's disk as well.
        "log_config": LogConfig(type=LogConfig.types.NONE),
        "ipc_mode": "private",
        "privileged": False,
    }
    if not spec.network:
        # Do not hand the host's resolver address to code that has no network.
        host["dns"] = ["127.0.0.1"]
    return create, host


class DockerChannel:
    """A hijacked attach/exec connection, demultiplexed, on the event loop."""

    def __init__(self, raw: Any) -> None:
        inner = getattr(raw, "_sock", raw)
        if not isinstance(inner, socket.socket):
            raise SandboxUnavailableError(f"unsupported Docker connection type {type(raw)!r}")
        self._keepalive = raw  # the SDK's response object closes the socket when collected
        self._sock = inner
        self._sock.setblocking(False)
        self._buffer = FrameBuffer()
        self._closed = False

    async def send(self, data: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self._sock, data)

    def close_input(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)

    async def receive(self) -> tuple[int, bytes] | None:
        loop = asyncio.get_running_loop()
        while True:
            frame = self._take_frame()
            if frame is not None:
                return frame
            if self._closed:
                return None
            try:
                chunk = await loop.sock_recv(self._sock, _RECV)
            except OSError:
                chunk = b""
            if not chunk:
                self._closed = True
                return None
            self._buffer.feed(chunk)

    def _take_frame(self) -> tuple[int, bytes] | None:
        if self._buffer.pending < _HEADER:
            return None
        header = self._buffer.peek(_HEADER)
        payload = self._buffer.take_frame(_HEADER, int.from_bytes(header[4:8], "big"))
        if payload is None:
            return None
        return (STDERR if header[0] == STDERR else STDOUT), payload

    def alive(self) -> bool:
        """Open, and nothing unread: a non-blocking peek tells EOF from silence."""
        if self._closed or self._buffer.pending:
            return False
        try:
            self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        except OSError:
            return False
        return False  # EOF, or bytes nobody asked for

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.close()
        finally:
            close = getattr(self._keepalive, "close", None)
            if callable(close):
                with contextlib.suppress(OSError):
                    close()


class DockerBackend:
    """The Docker engine behind `SandboxBackend`. Creates its client lazily."""

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client = client

    @property
    def api(self) -> Any:
        if self._client is None:
            try:
                self._client = docker.from_env()
            except docker.errors.DockerException as exc:
                raise SandboxUnavailableError(
                    f"Docker is not reachable ({exc}); {_HOW_TO_ENABLE}"
                ) from exc
        return self._client.api

    async def ping(self) -> None:
        def ping() -> None:
            try:
                self.api.ping()
            except (docker.errors.DockerException, OSError) as exc:
                raise SandboxUnavailableError(
                    f"Docker is not reachable ({exc}); {_HOW_TO_ENABLE}"
                ) from exc

        await asyncio.to_thread(ping)

    async def image_exists(self, image: str) -> bool:
        def exists() -> bool:
            try:
                self.api.inspect_image(image)
            except docker.errors.ImageNotFound:
                return False
            return True

        return await asyncio.to_thread(exists)

    async def start(self, spec: ContainerSpec) -> tuple[str, DockerChannel]:
        starting = asyncio.ensure_future(asyncio.to_thread(self._start, spec))
        try:
            container_id, raw = await asyncio.shield(starting)
        except asyncio.CancelledError:
            # The thread cannot be stopped; remove what it creates once it is done.
            starting.add_done_callback(self._remove_abandoned)
            raise
        try:
            return container_id, DockerChannel(raw)
        except BaseException:
            await self.remove(container_id)
            raise

    def _remove_abandoned(self, started: asyncio.Future[tuple[str, Any]]) -> None:
        if started.cancelled() or started.exception() is not None:
            return
        container_id, raw = started.result()
        DockerChannel(raw).close()
        asyncio.get_running_loop().run_in_executor(None, self._remove, container_id)

    def _start(self, spec: ContainerSpec) -> tuple[str, Any]:
        create, host = container_options(spec)
        api = self.api
        try:
            created = api.create_container(host_config=api.create_host_config(**host), **create)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailableError(
                f"sandbox image {spec.image} is missing; run `agentq sandbox build-images`"
            ) from exc
        except (docker.errors.DockerException, OSError) as exc:
            raise SandboxUnavailableError(f"cannot create a sandbox container: {exc}") from exc
        container_id = cast(str, created["Id"])
        try:
            # Attach before start so not a byte of the driver's output is missed.
            raw = api.attach_socket(
                container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            api.start(container_id)
        except BaseException as exc:
            self._remove(container_id)
            if isinstance(exc, docker.errors.DockerException | OSError):
                raise SandboxUnavailableError(f"cannot start a sandbox container: {exc}") from exc
            raise
        return container_id, raw

    async def exec(
        self,
        container_id: str,
        command: Sequence[str],
        *,
        stdin: bytes = b"",
        timeout_s: float,
        output_bytes: int,
    ) -> ExecOutput:
        def begin() -> tuple[str, Any]:
            exec_id = self.api.exec_create(container_id, list(command), stdin=True)["Id"]
            return cast(str, exec_id), self.api.exec_start(exec_id, socket=True)

        exec_id, raw = await asyncio.to_thread(begin)
        channel = DockerChannel(raw)
        outputs = {STDOUT: bytearray(), STDERR: bytearray()}
        truncated = {STDOUT: False, STDERR: False}
        timed_out = False
        try:
            async with asyncio.timeout(timeout_s):
                await channel.send(stdin)
                channel.close_input()
                while (chunk := await channel.receive()) is not None:
                    stream, data = chunk
                    room = output_bytes - len(outputs[stream])
                    outputs[stream] += data[: max(room, 0)]
                    if len(data) > room:
                        truncated[stream] = True
                        break
        except TimeoutError:
            timed_out = True
        finally:
            channel.close()
        if timed_out or any(truncated.values()):
            # An exec has no kill of its own: stopping its container is the only sure stop.
            await self.remove(container_id)
            exit_code = None
        else:
            info = await asyncio.to_thread(self.api.exec_inspect, exec_id)
            exit_code = cast(int | None, info.get("ExitCode"))
        return ExecOutput(
            exit_code=exit_code,
            stdout=bytes(outputs[STDOUT]),
            stderr=bytes(outputs[STDERR]),
            stdout_truncated=truncated[STDOUT],
            stderr_truncated=truncated[STDERR],
            timed_out=timed_out,
        )

    async def state(self, container_id: str, *, wait_s: float = 0.0) -> ContainerState:
        def inspect() -> ContainerState:
            if wait_s > 0:
                # Still running or already gone: inspect tells which. (requests'
                # errors are OSErrors.)
                with contextlib.suppress(docker.errors.DockerException, OSError):
                    self.api.wait(container_id, timeout=wait_s)
            try:
                state = self.api.inspect_container(container_id)["State"]
            except docker.errors.NotFound:
                return ContainerState(running=False, exit_code=None, oom_killed=False)
            return ContainerState(
                running=bool(state.get("Running")),
                exit_code=None if state.get("Running") else state.get("ExitCode"),
                oom_killed=bool(state.get("OOMKilled")),
            )

        return await asyncio.to_thread(inspect)

    async def remove(self, container_id: str) -> None:
        await asyncio.to_thread(self._remove, container_id)

    def _remove(self, container_id: str) -> None:
        try:
            self.api.remove_container(container_id, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            # 409: a removal is already in progress, which is what we want.
            if exc.status_code != 409:
                raise

    async def list(self, labels: Mapping[str, str]) -> list[str]:
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}

        def containers() -> list[str]:
            found = self.api.containers(all=True, filters=filters)
            return [cast(str, item["Id"]) for item in found]

        return await asyncio.to_thread(containers)

    async def labels(self, labels: Mapping[str, str]) -> dict[str, dict[str, str]]:
        filters = {"label": [f"{key}={value}" for key, value in labels.items()]}

        def containers() -> dict[str, dict[str, str]]:
            found = self.api.containers(all=True, filters=filters)
            return {cast(str, item["Id"]): dict(item.get("Labels") or {}) for item in found}

        return await asyncio.to_thread(containers)
