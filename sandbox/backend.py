"""The narrow seam between the sandbox and a container engine.

A container here is started with its main process attached: `start` returns a
`Channel` to that process's stdin/stdout/stderr, because the driver that runs
code *is* the main process (see `sandbox/protocol.py`). Everything else is
the small set of operations the pool and manager need. `DockerBackend` is the
real implementation; the protocol exists so the pool's logic does not depend
on Docker's SDK and could be served by another engine (podman, gVisor, k8s).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agentq.sandbox.models import Limits

STDOUT = 1
STDERR = 2


@dataclass(frozen=True)
class ContainerSpec:
    """Everything needed to create one hardened container."""

    image: str
    command: Sequence[str]
    labels: Mapping[str, str]
    limits: Limits  # only the container-level ones are used (`Limits.container_shape`)
    user: str
    network: bool = False
    network_name: str = "bridge"  # used only when `network` is true
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str = "/work"


@dataclass(frozen=True)
class ContainerState:
    running: bool
    exit_code: int | None
    oom_killed: bool


@dataclass(frozen=True)
class ExecOutput:
    """Output of a one-off command run with `SandboxBackend.exec`."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool


class Channel(Protocol):
    """A container main process's stdio: bytes in, (stream, bytes) out."""

    async def send(self, data: bytes) -> None: ...

    async def receive(self) -> tuple[int, bytes] | None:
        """Next chunk as (STDOUT or STDERR, data); None once the process closed both."""
        ...

    def alive(self) -> bool:
        """Without waiting: the process is still there and has sent nothing unread."""
        ...

    def close(self) -> None: ...


class SandboxBackend(Protocol):
    async def ping(self) -> None:
        """Raise `SandboxUnavailableError` if the engine cannot be reached."""
        ...

    async def image_exists(self, image: str) -> bool: ...

    async def start(self, spec: ContainerSpec) -> tuple[str, Channel]:
        """Create, attach to and start a container; return its id and channel."""
        ...

    async def exec(
        self,
        container_id: str,
        command: Sequence[str],
        *,
        stdin: bytes = b"",
        timeout_s: float,
        output_bytes: int,
    ) -> ExecOutput:
        """Run a command in a running container; stop reading at the cap or deadline.

        An exec cannot be killed on its own, so past the deadline or the cap
        the whole container is killed: callers use it only on disposable
        containers.
        """
        ...

    async def state(self, container_id: str, *, wait_s: float = 0.0) -> ContainerState:
        """The container's state; first wait up to `wait_s` for it to stop."""
        ...

    async def remove(self, container_id: str) -> None:
        """Kill and remove; a container already gone is not an error."""
        ...

    async def list(self, labels: Mapping[str, str]) -> list[str]:
        """Ids of all containers (running or not) carrying every given label."""
        ...

    async def labels(self, labels: Mapping[str, str]) -> dict[str, dict[str, str]]:
        """Like `list`, with each container's labels."""
        ...
