"""One live sandbox: a hardened container whose main process is the driver.

`SandboxContainer.run` sends one request and reads frames until the driver
reports the call done, enforcing from the host side the deadline and the
output caps (past either, the container is killed: the only stop that a
process inside cannot resist). The deadline is checked by the reader on the
event loop's clock after every chunk, and every frame's bytes, header
included, count against the call's budget, so a container flooding frames
cannot hold the worker's loop or outlive its timeout. A container that was
killed, crashed or misbehaved is marked unusable; its owner removes it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from agentq.sandbox.backend import STDOUT, Channel, ContainerSpec, SandboxBackend
from agentq.sandbox.errors import DriverProtocolError, SandboxUnavailableError
from agentq.sandbox.models import ExecRequest, ExecResult, Language, Limits
from agentq.sandbox.protocol import (
    ARTIFACT,
    DONE,
    HEADER,
    MAX_ARTIFACT_HEADER,
    READY,
    FrameDecoder,
    encode_request,
    frame_limits,
    parse_artifact,
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


def wire_budget(output_bytes: int) -> int:
    """Bytes of `o` or `e` frames, headers included, one call may send per stream.

    Twice the output cap plus 64 KiB: real output fills its frames (the drivers
    coalesce small writes), so only a flood of tiny or empty frames, which
    carry no output, reaches this before the output cap.
    """
    return 2 * output_bytes + 65_536


class SandboxContainer:
    def __init__(
        self, backend: SandboxBackend, container_id: str, channel: Channel, shape: Shape
    ) -> None:
        self.backend = backend
        self.id = container_id
        self.shape = shape
        self._channel = channel
        self._frames = FrameDecoder(frame_limits(None))
        self._driver_stderr = CappedBuffer(_DRIVER_STDERR_BYTES)
        self._deadline = float("inf")  # loop time past which the current read gives up
        self._wire_left = _IDLE_WIRE_BYTES  # bytes the container may still send us
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

    def alive(self) -> bool:
        """Still running and silent since its last call: fit to hand out.

        A pooled container that died (killed by another process, the OOM
        killer, an engine restart) or that speaks unprompted is not.
        """
        return self.usable and self._frames.pending == 0 and self._channel.alive()

    async def _wait_ready(self, timeout_s: float) -> None:
        self._frames.limits = frame_limits(None)
        self._wire_left = _IDLE_WIRE_BYTES
        self._deadline = asyncio.get_running_loop().time() + timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                frame = await self._next_frame()
        except (TimeoutError, DriverProtocolError, OSError):
            frame = None
        if frame is None or frame[0] != READY:
            detail = self._driver_stderr.text().strip()[-500:]
            raise SandboxUnavailableError(
                f"the sandbox driver did not start in {self.shape.image}"
                + (f": {detail}" if detail else "")
            )

    async def _next_frame(self) -> tuple[bytes, bytes] | None:
        """The next frame, within the deadline and the wire budget, whatever the container sends.

        The loop is given a turn after every chunk and the deadline is checked
        here, on the loop's clock: a container that floods its stdout can
        neither starve the other calls of this worker nor outlive its timeout.
        """
        loop = asyncio.get_running_loop()
        while True:
            frame = self._frames.next()
            if frame is not None:
                self._wire_left -= HEADER.size + len(frame[1])
                return frame
            if loop.time() > self._deadline:
                raise TimeoutError
            chunk = await self._channel.receive()
            if chunk is None:
                return None
            stream, data = chunk
            if stream == STDOUT:
                self._frames.feed(data)
            else:
                self._driver_stderr.add(data)
                self._wire_left -= len(data)
            if self._wire_left < 0:
                raise WireBudgetExceeded
            await asyncio.sleep(0)

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
        call_id = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        self._frames.limits = frame_limits(request)
        self._wire_left = _call_wire_bytes(limits)
        self._deadline = loop.time() + limits.timeout_s
        try:
            # One deadline, two guards: this one for a silent container, the
            # reader's own check for one that keeps the loop busy.
            async with asyncio.timeout_at(self._deadline):
                await self._channel.send(encode_request(request, call_id))
                obs.outcome = await self._read_until_done(call_id, obs)
        except TimeoutError:
            obs.outcome = Outcome.TIMEOUT
        except WireBudgetExceeded:
            obs.outcome = Outcome.FLOOD
        except DriverProtocolError as exc:
            obs.outcome, obs.detail = Outcome.PROTOCOL, exc.message
        except OSError as exc:  # the channel broke under us
            obs.outcome, obs.detail = Outcome.EXITED, str(exc)
        obs.duration_s = time.monotonic() - started
        if obs.outcome is Outcome.DONE and obs.done is not None and obs.done.restarted:
            await self._await_restart(obs)
        self.last_used = time.monotonic()
        await self._settle(obs)
        self._deadline = float("inf")
        self._wire_left = _IDLE_WIRE_BYTES
        return build_result(obs)

    async def _read_until_done(self, call_id: str, obs: Observation) -> Outcome:
        # Each output stream: its buffer, the outcome when its cap is hit, and what it
        # may still cost on the wire (frame headers included) before it is a flood.
        outputs = {
            STDOUT_FRAME: (obs.stdout, Outcome.STDOUT_CAP),
            STDERR_FRAME: (obs.stderr, Outcome.STDERR_CAP),
        }
        wire_left = dict.fromkeys(outputs, wire_budget(obs.limits.output_bytes))
        while True:
            frame = await self._next_frame()
            if frame is None:
                return Outcome.EXITED
            kind, payload = frame
            if kind in outputs:
                buffer, capped = outputs[kind]
                wire_left[kind] -= HEADER.size + len(payload)
                if not buffer.add(payload):
                    return capped
                if wire_left[kind] < 0:
                    return Outcome.FLOOD
            elif kind == ARTIFACT:
                header, data = parse_artifact(payload)
                obs.artifacts.add(header.path, header.media_type, data)
                if obs.artifacts.too_many_frames:
                    raise DriverProtocolError("more artifact frames than the limits allow")
            elif kind == DONE:
                done = parse_done(payload)
                if done.call != call_id:
                    raise DriverProtocolError("a done frame for another call")
                obs.done = done
                return Outcome.DONE
            # READY: only after a restart, which the done frame announces.

    async def _await_restart(self, obs: Observation) -> None:
        """The driver re-executed itself to end threads the code left: wait until it is back.

        Not part of the call's time: the code had finished. A driver that does
        not come back costs the container, never the result.
        """
        obs.notices.append(
            "Threads the code started were still running when the call ended: they were "
            "stopped by restarting the interpreter, so its variables are gone (files are kept)."
        )
        self._frames.limits = frame_limits(None)
        self._deadline = asyncio.get_running_loop().time() + _RESTART_TIMEOUT_S
        try:
            async with asyncio.timeout_at(self._deadline):
                frame = await self._next_frame()
        except (TimeoutError, DriverProtocolError, WireBudgetExceeded, OSError):
            frame = None
        if frame is None or frame[0] != READY:
            await self.destroy()

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


class WireBudgetExceeded(Exception):
    """The container sent more bytes than any call within its limits could."""


_RESTART_TIMEOUT_S = 10.0
# Between calls a container has nothing to say: a little for the driver's own stderr.
_IDLE_WIRE_BYTES = 65_536


def _call_wire_bytes(limits: Limits) -> int:
    """All bytes one call may send, every stream and frame kind, headers included."""
    return (
        2 * wire_budget(limits.output_bytes)
        + limits.artifacts_total_bytes
        + (limits.max_artifacts + 16) * (MAX_ARTIFACT_HEADER + 64)
        + frame_limits(None)[READY]
        + 12 * limits.output_bytes
        + 1_000_000
    )
