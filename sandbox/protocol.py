"""The wire protocol between the host and the in-container driver.

Why a resident driver rather than one `docker exec` per call: an exec costs
a round trip to the daemon plus an interpreter start on every call, cannot be
killed on its own, and cannot keep Python state between calls. The driver is
instead the container's main process, started once (ahead of time, in the
warm pool), and the host talks to it over the attached stdio:

- host -> driver, on stdin: one JSON request per line (JSON escapes every
  control byte, so nothing in a request can look like a terminal escape);
  each carries a `call` id the driver echoes in its done frame;
- driver -> host, on stdout: frames `kind (1 byte) | length (u32 BE) | payload`.
  `R` ready, `o` a chunk of the code's stdout, `e` of its stderr, `a` one
  artifact (`u16 BE header length | JSON header {path, media_type} | raw
  bytes`), `d` done (JSON: call, exit_code, value, oom, signal, notices,
  restarted).

Everything the driver sends is untrusted: the code runs beside the driver and
can write frames itself (Python through the driver's descriptors, JavaScript
through `/proc/<ppid>/fd/1`). So the host bounds every frame by its kind
before buffering it, parses the done frame against a schema with a hard limit
on every string and list, builds artifacts itself from raw bytes (never
trusting a claimed size, text or image type), and enforces deadline and output
caps itself by killing the container.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentq.sandbox.errors import DriverProtocolError
from agentq.sandbox.frames import FrameBuffer
from agentq.sandbox.models import ExecRequest

READY = b"R"
STDOUT = b"o"
STDERR = b"e"
ARTIFACT = b"a"
DONE = b"d"
KINDS = frozenset({READY, STDOUT, STDERR, ARTIFACT, DONE})
HEADER = struct.Struct(">cI")
_ARTIFACT_HEADER = struct.Struct(">H")
# The driver sends output in chunks of at most 64 KiB; anything larger is not ours.
MAX_OUTPUT_FRAME = 1 << 16
MAX_READY_FRAME = 4096
MAX_ARTIFACT_HEADER = 2048
MAX_PATH_CHARS = 1024
MAX_NOTICES = 64
MAX_NOTICE_CHARS = 1000


def encode_request(request: ExecRequest, call_id: str) -> bytes:
    limits = request.limits
    payload: dict[str, Any] = {
        "call": call_id,
        "code": request.code,
        "files": request.files,
        "value_chars": limits.output_bytes,
        "memory_mb": limits.memory_mb,
        "limits": {
            "artifact_bytes": limits.artifact_bytes,
            "artifacts_total_bytes": limits.artifacts_total_bytes,
            "max_artifacts": limits.max_artifacts,
        },
    }
    return json.dumps(payload, ensure_ascii=True).encode("ascii") + b"\n"


def frame_limits(request: ExecRequest | None) -> dict[bytes, int]:
    """The largest payload a well-behaved driver sends, per frame kind, for this request."""
    if request is None:  # waiting for the driver to start: only a ready frame is expected
        return {READY: MAX_READY_FRAME}
    limits = request.limits
    # The value is at most `output_bytes` characters; JSON may escape one into 12 bytes.
    done = 12 * limits.output_bytes + 12 * MAX_NOTICES * MAX_NOTICE_CHARS + 4096
    return {
        READY: MAX_READY_FRAME,
        STDOUT: MAX_OUTPUT_FRAME,
        STDERR: MAX_OUTPUT_FRAME,
        ARTIFACT: _ARTIFACT_HEADER.size + MAX_ARTIFACT_HEADER + limits.artifact_bytes,
        DONE: done,
    }


class FrameDecoder:
    """Incremental parser of driver frames; bounds each frame before buffering it."""

    def __init__(self, limits: Mapping[bytes, int]) -> None:
        self.limits = dict(limits)
        self._buffer = FrameBuffer()

    @property
    def pending(self) -> int:
        return self._buffer.pending

    def feed(self, data: bytes) -> None:
        self._buffer.feed(data)

    def next(self) -> tuple[bytes, bytes] | None:
        if self._buffer.pending < HEADER.size:
            return None
        kind, size = HEADER.unpack(self._buffer.peek(HEADER.size))
        limit = self.limits.get(kind)
        name = kind.decode("latin-1")
        if limit is None:
            raise DriverProtocolError(f"unexpected frame kind {name!r} from the sandbox driver")
        if size > limit:
            raise DriverProtocolError(f"a {name!r} frame of {size} bytes exceeds {limit}")
        payload = self._buffer.take_frame(HEADER.size, size)
        return None if payload is None else (kind, payload)


class DoneFrame(BaseModel):
    """The driver's report at the end of a call (validated, still untrusted).

    Every field is bounded: the frame itself is bounded by `frame_limits`, and
    nothing here grows with the number of files the code wrote.
    """

    model_config = ConfigDict(extra="ignore")

    call: str = Field(default="", max_length=64)
    exit_code: int | None = Field(default=None, ge=-(2**31), le=2**31)
    value: str | None = None
    oom: bool = False
    signal: str | None = Field(default=None, max_length=32)  # what killed the code's process
    notices: list[str] = Field(default_factory=list, max_length=MAX_NOTICES)
    restarted: bool = False  # the driver restarted its interpreter: session state is gone


def parse_done(payload: bytes) -> DoneFrame:
    try:
        done = DoneFrame.model_validate_json(payload)
    except ValueError as exc:
        raise DriverProtocolError(f"invalid done frame from the sandbox driver: {exc}") from exc
    done.notices = [notice[:MAX_NOTICE_CHARS] for notice in done.notices]
    return done


class ArtifactHeader(BaseModel):
    model_config = ConfigDict(extra="ignore")

    path: str = Field(min_length=1, max_length=MAX_PATH_CHARS)
    media_type: str = Field(default="application/octet-stream", max_length=100)


def parse_artifact(payload: bytes) -> tuple[ArtifactHeader, bytes]:
    """Split an `a` frame into its header and the file's raw bytes."""
    if len(payload) < _ARTIFACT_HEADER.size:
        raise DriverProtocolError("a truncated artifact frame from the sandbox driver")
    (size,) = _ARTIFACT_HEADER.unpack_from(payload)
    end = _ARTIFACT_HEADER.size + size
    if size > MAX_ARTIFACT_HEADER or end > len(payload):
        raise DriverProtocolError("an artifact header of an invalid size from the sandbox driver")
    try:
        header = ArtifactHeader.model_validate_json(payload[_ARTIFACT_HEADER.size : end])
    except ValidationError as exc:
        raise DriverProtocolError(f"invalid artifact header: {exc.errors()[0]['msg']}") from exc
    return header, payload[end:]
