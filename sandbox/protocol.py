"""The wire protocol between the host and the in-container driver.

Why a resident driver rather than one `docker exec` per call: an exec costs
a round trip to the daemon plus an interpreter start on every call, cannot be
killed on its own, and cannot keep Python state between calls. The driver is
instead the container's main process, started once (ahead of time, in the
warm pool), and the host talks to it over the attached stdio:

- host -> driver, on stdin: one JSON request per line (JSON escapes every
  control byte, so nothing in a request can look like a terminal escape);
- driver -> host, on stdout: frames `kind (1 byte) | length (u32 BE) | payload`.
  `R` ready, `o` a chunk of the code's stdout, `e` of its stderr, `d` done
  (JSON: exit_code, value, oom, signal, artifacts, notices).

Everything the driver sends is untrusted (the code runs in the driver's
process and could forge frames): the host bounds every frame, validates the
`d` payload, and enforces deadline and output caps itself by killing the
container.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentq.sandbox.errors import DriverProtocolError
from agentq.sandbox.models import ExecRequest

READY = b"R"
STDOUT = b"o"
STDERR = b"e"
DONE = b"d"
KINDS = frozenset({READY, STDOUT, STDERR, DONE})
_HEADER = struct.Struct(">cI")
# The driver sends output in chunks of at most 64 KiB; anything larger is not ours.
MAX_OUTPUT_FRAME = 1 << 20


def encode_request(request: ExecRequest) -> bytes:
    limits = request.limits
    payload: dict[str, Any] = {
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


def max_done_frame(request: ExecRequest) -> int:
    """Largest `d` payload a well-behaved driver can send for this request."""
    limits = request.limits
    base64_total = (limits.artifacts_total_bytes * 4) // 3 + 4 * limits.max_artifacts
    # JSON escaping can at most double text (\uXXXX is 6x, but the value and
    # text artifacts are bounded first): allow a generous constant on top.
    return 6 * (limits.artifacts_total_bytes + limits.output_bytes) + base64_total + (1 << 20)


class FrameDecoder:
    """Incremental parser of driver frames; bounds each frame before buffering it."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next(self, max_done: int) -> tuple[bytes, bytes] | None:
        buffer = self._buffer
        if len(buffer) < _HEADER.size:
            return None
        kind, size = _HEADER.unpack_from(buffer)
        if kind not in KINDS:
            raise DriverProtocolError(f"unknown frame kind {kind!r} from the sandbox driver")
        limit = max_done if kind == DONE else MAX_OUTPUT_FRAME
        if size > limit:
            raise DriverProtocolError(f"a {kind!r} frame of {size} bytes exceeds {limit}")
        end = _HEADER.size + size
        if len(buffer) < end:
            return None
        payload = bytes(buffer[_HEADER.size : end])
        del buffer[:end]
        return kind, payload


class DoneFrame(BaseModel):
    """The driver's report at the end of a call (validated, still untrusted)."""

    model_config = ConfigDict(extra="ignore")

    exit_code: int | None = None
    value: str | None = None
    oom: bool = False
    signal: str | None = None  # the signal that killed the code's process, if one did
    artifacts: list[dict[str, Any]] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list)


def parse_done(payload: bytes) -> DoneFrame:
    try:
        return DoneFrame.model_validate_json(payload)
    except ValueError as exc:
        raise DriverProtocolError(f"invalid done frame from the sandbox driver: {exc}") from exc
