"""Turning what happened in a container into an `ExecResult` (pure functions).

The messages in `error` are written for the model that sent the code: one
sentence saying what stopped the code and which limit it hit.
"""

from __future__ import annotations

import base64
import signal
from dataclasses import dataclass, field
from enum import Enum

from pydantic import ValidationError

from agentq.sandbox.models import Artifact, ExecResult, Limits
from agentq.sandbox.protocol import DoneFrame


class Outcome(Enum):
    DONE = "done"  # the driver reported the end of the call
    TIMEOUT = "timeout"
    STDOUT_CAP = "stdout_cap"
    STDERR_CAP = "stderr_cap"
    EXITED = "exited"  # the driver's process ended (OOM, os._exit, crash)
    PROTOCOL = "protocol"  # the driver sent garbage: treated like a crash
    FLOOD = "flood"  # more bytes on the control channel than any call within its limits sends


class CappedBuffer:
    """Keeps the first `cap` bytes written to it; remembers if more came."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.truncated = False

    def add(self, chunk: bytes) -> bool:
        """Append; False once the cap is exceeded (the rest is dropped)."""
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.data += chunk[: max(room, 0)]
            self.truncated = True
            return False
        self.data += chunk
        return True

    def text(self) -> str:
        # The code may print anything: invalid UTF-8 (or a character cut at the
        # cap) becomes U+FFFD rather than an exception.
        return self.data.decode("utf-8", errors="replace")


@dataclass
class Observation:
    """Everything the host saw of one call."""

    outcome: Outcome
    limits: Limits
    stdout: CappedBuffer
    stderr: CappedBuffer
    duration_s: float
    done: DoneFrame | None = None
    container_exit_code: int | None = None
    oom_killed: bool = False  # the engine's or the driver's word
    session: bool = False  # a `run` session: its state is lost when the container dies
    detail: str = ""  # e.g. the protocol error
    notices: list[str] = field(default_factory=list)
    artifacts: ArtifactCollector = field(init=False)

    def __post_init__(self) -> None:
        self.artifacts = ArtifactCollector(self.limits)


def signal_name(exit_code: int) -> str | None:
    """'SIGKILL' for 137 (shell convention) or -9 (Python's), else None."""
    number = exit_code - 128 if exit_code > 128 else -exit_code
    if number <= 0:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def error_message(obs: Observation) -> str | None:
    limits = obs.limits
    lost = " The session's state was lost; the next call starts fresh." if obs.session else ""
    if obs.oom_killed:
        return (
            f"Out of memory: the code exceeded the {limits.memory_mb} MB limit "
            f"and was killed.{lost}"
        )
    match obs.outcome:
        case Outcome.TIMEOUT:
            return (
                f"Timed out: the code ran longer than {limits.timeout_s:g} s and was killed.{lost}"
            )
        case Outcome.STDOUT_CAP | Outcome.STDERR_CAP:
            stream = "stdout" if obs.outcome is Outcome.STDOUT_CAP else "stderr"
            return (
                f"Output limit: {stream} exceeded {limits.output_bytes} bytes; the code was "
                f"killed and the output truncated.{lost}"
            )
        case Outcome.FLOOD:
            return (
                "Output limit: the code sent more output frames than its "
                f"{limits.output_bytes}-byte output limit allows and was killed.{lost}"
            )
        case Outcome.PROTOCOL:
            return f"The sandbox failed: {obs.detail}.{lost}"
        case Outcome.EXITED:
            code = obs.container_exit_code
            name = signal_name(code) if code is not None else None
            if name is not None:
                return f"The code's process was killed by {name}.{lost}"
            return f"The interpreter exited (code {code}) before the call finished.{lost}"
        case Outcome.DONE:
            killed_by = obs.done.signal if obs.done is not None else None
            if killed_by:
                return f"The code's process was killed by {killed_by[:20]}."
            return None


def exit_code(obs: Observation) -> int | None:
    if obs.outcome is Outcome.DONE and obs.done is not None:
        return obs.done.exit_code
    if obs.outcome is Outcome.EXITED and not obs.oom_killed:
        return obs.container_exit_code
    return None  # killed by us (or the kernel) before it could exit


# Media types an artifact may carry; anything else is sent as octet-stream.
MEDIA_TYPES = frozenset(
    {
        "text/plain",
        "text/csv",
        "text/html",
        "text/markdown",
        "text/xml",
        "text/css",
        "text/javascript",
        "text/x-python",
        "application/json",
        "application/xml",
        "application/pdf",
        "application/zip",
        "application/gzip",
        "application/octet-stream",
        "image/svg+xml",
    }
)
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def sniff_image(head: bytes) -> str | None:
    """The image type the bytes really are, if one a model can be shown."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def build_artifact(path: str, claimed_type: str, data: bytes) -> Artifact:
    """An artifact from raw bytes: size, text-ness and image type are the host's own findings.

    Raises ValueError (naming why) for a path that is not a plain relative one.
    """
    image_type = sniff_image(data[:16])
    text: str | None = None
    if image_type is None and b"\x00" not in data:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    if image_type is not None:
        media_type = image_type
    elif claimed_type in MEDIA_TYPES:
        media_type = claimed_type
    else:
        media_type = "text/plain" if text is not None else "application/octet-stream"
    return Artifact(
        path=path,
        size=len(data),
        media_type=media_type,
        text=text,
        data_base64=None if text is not None else base64.b64encode(data).decode("ascii"),
        is_image=image_type is not None,
    )


class ArtifactCollector:
    """Artifacts of one call as their frames arrive, within the request's limits."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.artifacts: list[Artifact] = []
        self.notices: list[str] = []
        self.total_bytes = 0
        self.frames = 0

    def add(self, path: str, claimed_type: str, data: bytes) -> None:
        self.frames += 1
        limits = self.limits
        label = path[:200]
        if len(self.artifacts) >= limits.max_artifacts:
            self._notice(f"out/{label}: more than {limits.max_artifacts} artifacts; not returned")
            return
        if len(data) > limits.artifact_bytes:
            self._notice(f"out/{label}: exceeds the {limits.artifact_bytes}-byte artifact limit")
            return
        if self.total_bytes + len(data) > limits.artifacts_total_bytes:
            self._notice(
                f"out/{label}: artifacts would exceed {limits.artifacts_total_bytes} bytes "
                "in total; not returned"
            )
            return
        try:
            artifact = build_artifact(path, claimed_type, data)
        except ValidationError as exc:
            self._notice(f"out/{label}: refused ({_first_error(exc)})")
            return
        self.total_bytes += len(data)
        self.artifacts.append(artifact)

    def _notice(self, notice: str) -> None:
        if len(self.notices) < MAX_HOST_NOTICES:
            self.notices.append(notice)

    @property
    def too_many_frames(self) -> bool:
        """More artifact frames than a driver keeping to the limits would ever send."""
        return self.frames > self.limits.max_artifacts + MAX_HOST_NOTICES


MAX_HOST_NOTICES = 16


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
    return str(exc)


def build_result(obs: Observation) -> ExecResult:
    artifacts: list[Artifact] = []
    notices = list(obs.notices)
    value: str | None = None
    if obs.done is not None:
        artifacts = obs.artifacts.artifacts
        notices += obs.done.notices + obs.artifacts.notices
        value = obs.done.value
        if value is not None and len(value) > obs.limits.output_bytes:
            value = value[: obs.limits.output_bytes] + "... [truncated]"
    return ExecResult(
        exit_code=exit_code(obs),
        stdout=obs.stdout.text(),
        stderr=obs.stderr.text(),
        stdout_truncated=obs.stdout.truncated,
        stderr_truncated=obs.stderr.truncated,
        duration_s=round(obs.duration_s, 6),
        timed_out=obs.outcome is Outcome.TIMEOUT,
        value=value,
        artifacts=artifacts,
        notices=notices,
        error=error_message(obs),
    )
