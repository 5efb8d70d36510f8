"""Turning what happened in a container into an `ExecResult` (pure functions).

The messages in `error` are written for the model that sent the code: one
sentence saying what stopped the code and which limit it hit.
"""

from __future__ import annotations

import base64
import binascii
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


def checked_artifacts(done: DoneFrame, limits: Limits) -> tuple[list[Artifact], list[str]]:
    """Re-check what the driver claims: paths, sizes, counts. Drop what fails."""
    artifacts: list[Artifact] = []
    notices: list[str] = []
    total = 0
    for raw in done.artifacts:
        label = str(raw.get("path", "?"))[:200]
        try:
            artifact = Artifact.model_validate(raw)
            size = _payload_size(artifact)
        except (ValidationError, ValueError) as exc:
            notices.append(f"out/{label}: refused ({_first_error(exc)})")
            continue
        if size != artifact.size or size > limits.artifact_bytes:
            notices.append(f"out/{label}: refused (size does not match or exceeds the limit)")
            continue
        if len(artifacts) >= limits.max_artifacts or total + size > limits.artifacts_total_bytes:
            notices.append(f"out/{label}: not returned (artifact limits reached)")
            continue
        total += size
        artifacts.append(artifact)
    return artifacts, notices


def _payload_size(artifact: Artifact) -> int:
    if (artifact.text is None) == (artifact.data_base64 is None):
        raise ValueError("exactly one of text and data_base64 must be set")
    if artifact.text is not None:
        return len(artifact.text.encode("utf-8"))
    try:
        return len(base64.b64decode(artifact.data_base64 or "", validate=True))
    except binascii.Error as exc:
        raise ValueError(f"invalid base64: {exc}") from exc


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
    return str(exc)


def build_result(obs: Observation) -> ExecResult:
    artifacts: list[Artifact] = []
    notices = list(obs.notices)
    value: str | None = None
    if obs.done is not None:
        artifacts, refused = checked_artifacts(obs.done, obs.limits)
        notices += [str(n)[:500] for n in obs.done.notices[:100]] + refused
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
