"""One live sandbox: a hardened container whose main process is the driver.

`SandboxContainer.run` sends one request and reads frames until the driver
reports the call done, enforcing from the host side the deadline and the
output caps (past either, the container is killed: the only stop that a
process inside cannot resist). A container that was killed, crashed or
misbehaved is marked unusable; its owner removes it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from agentq.sandbox.backend import STDOUT, Channel, ContainerSpec, SandboxBackend
from agentq.sandbox.errors import DriverProtocolError, SandboxUnavailableError
from agentq.sandbox.models import ExecRequest, ExecResult, Language, Limits
from agentq.sandbox.protocol import (
    DONE,
    READY,
    FrameDecoder,
    encode_request,
    max_done_frame,
    parse_done,
)
from agentq.sandbox.protocol import (
    STDERR as STDERR_FRAME,
)
from agentq.sandbox.protocol import (
    STDOUT as STDOUT_FRAME,
)
from agentq.sandbox.results import CappedBuffer, Observation, Outcome, build_result

WORK_DIR = "/work"
# A fixed, minimal environment: nothing of the worker's (secrets) reaches the code.
SANDBOX_ENV: Mapping[str, str] = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": WORK_DIR,
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
_DRIVER_STDERR_BYTES = 4096  # the driver's own stderr: only crashes of the driver itself


def driver_command(language: Language) -> list[str]:
    """The container command: the driver's source, passed inline (no file to copy in)."""
    drivers = resources.files("agentq.sandbox.drivers")
    if language == "python":
        source = drivers.joinpath("python_driver.py").read_text(encoding="utf-8")
        # -I: ignore PYTHON* variables and user site; -u: no buffering in the relay path.
        return ["python3", "-I", "-u", "-c", source]
    source = drivers.joinpath("node_driver.js").read_text(encoding="utf-8")
    return ["node", "-e", source]


@dataclass(frozen=True)
class Shape:
    """What a container is fixed to at creation; containers of one shape are interchangeable."""

    language: Language
    image: str
    limits: Limits  # the request's; only `Limits.container_shape()` matters here
    network: bool

    def key(self) -> tuple[object, ...]:
        return (self.language, self.image, self.limits.container_shape(), self.network)


class SandboxContainer:
    def __init__(
        self, backend: SandboxBackend, container_id: str, channel: Channel, shape: Shape
    ) -> None:
        self.backend = backend
        self.id = container_id
        self.shape = shape
        self._channel = channel
        self._frames = FrameDecoder()
        self._driver_stderr = CappedBuffer(_DRIVER_STDERR_BYTES)
        self.usable = True
        self.calls = 0
        self.last_used = time.monotonic()

    @classmethod
    async def start(
        cls,
        backend: SandboxBackend,
        shape: Shape,
        *,
        labels: Mapping[str, str],
        user: str,
        network_name: str,
        ready_timeout_s: float,
    ) -> SandboxContainer:
        spec = ContainerSpec(
            image=shape.image,
            command=driver_command(shape.language),
            labels=labels,
            limits=shape.limits,
            user=user,
            network=shape.network,
            network_name=network_name,
            env=SANDBOX_ENV,
            workdir=WORK_DIR,
        )
        container_id, channel = await backend.start(spec)
        container = cls(backend, container_id, channel, shape)
        try:
            await container._wait_ready(ready_timeout_s)
        except BaseException:
            await container.destroy()
            raise
        return container

    async def _wait_ready(self, timeout_s: float) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                frame = await self._next_frame(max_done=0)
        except TimeoutError:
            frame = None
        if frame is None or frame[0] != READY:
            detail = self._driver_stderr.text().strip()[-500:]
            raise SandboxUnavailableError(
                f"the sandbox driver did not start in {self.shape.image}"
                + (f": {detail}" if detail else "")
            )

    async def _next_frame(self, max_done: int) -> tuple[bytes, bytes] | None:
        while True:
            frame = self._frames.next(max_done)
            if frame is not None:
                return frame
            chunk = await self._channel.receive()
            if chunk is None:
                return None
            stream, data = chunk
            if stream == STDOUT:
                self._frames.feed(data)
            else:
                self._driver_stderr.add(data)

    async def run(self, request: ExecRequest, *, session: bool = False) -> ExecResult:
        """Run one request; afterwards `usable` says whether the container can serve another."""
        if not self.usable:
            raise RuntimeError("this sandbox container was already killed")
        limits = request.limits
        obs = Observation(
            outcome=Outcome.DONE,
            limits=limits,
            stdout=CappedBuffer(limits.output_bytes),
            stderr=CappedBuffer(limits.output_bytes),
            duration_s=0.0,
            session=session,
        )
        self.calls += 1
        started = time.monotonic()
        try:
            async with asyncio.timeout(limits.timeout_s):
                await self._channel.send(encode_request(request))
                obs.outcome = await self._read_until_done(request, obs)
        except TimeoutError:
            obs.outcome = Outcome.TIMEOUT
        except DriverProtocolError as exc:
            obs.outcome, obs.detail = Outcome.PROTOCOL, exc.message
        except OSError as exc:  # the channel broke under us
            obs.outcome, obs.detail = Outcome.EXITED, str(exc)
        obs.duration_s = time.monotonic() - started
        self.last_used = time.monotonic()
        await self._settle(obs)
        return build_result(obs)

    async def _read_until_done(self, request: ExecRequest, obs: Observation) -> Outcome:
        max_done = max_done_frame(request)
        while True:
            frame = await self._next_frame(max_done)
            if frame is None:
                return Outcome.EXITED
            kind, payload = frame
            if kind == STDOUT_FRAME and not obs.stdout.add(payload):
                return Outcome.STDOUT_CAP
            if kind == STDERR_FRAME and not obs.stderr.add(payload):
                return Outcome.STDERR_CAP
            if kind == DONE:
                obs.done = parse_done(payload)
                return Outcome.DONE
            if kind == READY:
                raise DriverProtocolError("unexpected ready frame during a call")

    async def _settle(self, obs: Observation) -> None:
        """After a call: learn why the container stopped, if it did; kill it if we must."""
        if obs.outcome is Outcome.DONE:
            obs.oom_killed = obs.done is not None and obs.done.oom
            return
        self.usable = False
        if obs.outcome is Outcome.EXITED:
            state = await self.backend.state(self.id, wait_s=5.0)
            obs.container_exit_code = state.exit_code
            obs.oom_killed = state.oom_killed
        await self.destroy()

    async def destroy(self) -> None:
        self.usable = False
        self._channel.close()
        await self.backend.remove(self.id)
