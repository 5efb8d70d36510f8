"""Host side of the driver protocol and result building (pure)."""

from __future__ import annotations

import base64
import struct

import pytest

from agentq.sandbox.errors import DriverProtocolError
from agentq.sandbox.models import ExecRequest, Limits
from agentq.sandbox.protocol import DONE, STDOUT, FrameDecoder, encode_request, parse_done
from agentq.sandbox.results import (
    CappedBuffer,
    Observation,
    Outcome,
    build_result,
    checked_artifacts,
    signal_name,
)


def frame(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack(">I", len(payload)) + payload


def test_decoder_reassembles_frames_split_anywhere() -> None:
    stream = frame(STDOUT, b"hello") + frame(DONE, b'{"exit_code": 0}')
    decoder = FrameDecoder()
    frames = []
    for byte in stream:
        decoder.feed(bytes([byte]))
        while (item := decoder.next(max_done=100)) is not None:
            frames.append(item)
    assert frames == [(STDOUT, b"hello"), (DONE, b'{"exit_code": 0}')]


def test_decoder_rejects_unknown_kinds_and_oversized_frames() -> None:
    decoder = FrameDecoder()
    decoder.feed(frame(b"x", b""))
    with pytest.raises(DriverProtocolError, match="unknown frame kind"):
        decoder.next(max_done=10)
    decoder = FrameDecoder()
    decoder.feed(DONE + struct.pack(">I", 1 << 30))  # only the header: never buffered
    with pytest.raises(DriverProtocolError, match="exceeds"):
        decoder.next(max_done=1000)


def test_request_is_one_ascii_json_line() -> None:
    request = ExecRequest(language="python", code="print('é\\x10')\n", files={"a": "\x10"})
    line = encode_request(request)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert all(byte >= 0x20 for byte in line[:-1])  # no control byte reaches the driver raw


def test_parse_done_rejects_garbage() -> None:
    assert parse_done(b'{"exit_code": 2, "value": "3"}').exit_code == 2
    with pytest.raises(DriverProtocolError):
        parse_done(b"not json")


def test_capped_buffer_keeps_the_prefix_and_decodes_leniently() -> None:
    buffer = CappedBuffer(4)
    assert buffer.add(b"ab")
    assert not buffer.add(b"\xffcde")
    assert buffer.truncated
    assert buffer.text() == "ab\ufffdc"


def observation(outcome: Outcome, **kwargs: object) -> Observation:
    limits = Limits(timeout_s=2, memory_mb=64, output_bytes=10)
    return Observation(
        outcome=outcome,
        limits=limits,
        stdout=CappedBuffer(10),
        stderr=CappedBuffer(10),
        duration_s=1.0,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("obs", "exit_code", "error"),
    [
        (observation(Outcome.TIMEOUT), None, "Timed out: the code ran longer than 2 s"),
        (observation(Outcome.STDOUT_CAP), None, "Output limit: stdout exceeded 10 bytes"),
        (observation(Outcome.STDERR_CAP), None, "Output limit: stderr exceeded 10 bytes"),
        (observation(Outcome.EXITED, oom_killed=True), None, "Out of memory: the code exceeded"),
        (observation(Outcome.EXITED, container_exit_code=137), 137, "killed by SIGKILL"),
        (observation(Outcome.EXITED, container_exit_code=3), 3, "exited (code 3)"),
        (observation(Outcome.PROTOCOL, detail="bad frame"), None, "The sandbox failed: bad"),
        (observation(Outcome.TIMEOUT, session=True), None, "session's state was lost"),
    ],
)
def test_error_messages(obs: Observation, exit_code: int | None, error: str) -> None:
    result = build_result(obs)
    assert result.exit_code == exit_code
    assert result.error is not None
    assert error in result.error
    assert result.timed_out == (obs.outcome is Outcome.TIMEOUT)


def test_done_results() -> None:
    done = parse_done(b'{"exit_code": 0, "value": "' + b"v" * 50 + b'"}')
    result = build_result(observation(Outcome.DONE, done=done))
    assert result.ok
    assert result.value == "v" * 10 + "... [truncated]"
    killed = parse_done(b'{"exit_code": 137, "signal": "SIGKILL"}')
    assert "killed by SIGKILL" in (build_result(observation(Outcome.DONE, done=killed)).error or "")
    oom = parse_done(b'{"exit_code": 137, "oom": true}')
    result = build_result(observation(Outcome.DONE, done=oom, oom_killed=True))
    assert "Out of memory" in (result.error or "")


def test_signal_names() -> None:
    assert signal_name(137) == "SIGKILL"
    assert signal_name(-9) == "SIGKILL"
    assert signal_name(139) == "SIGSEGV"
    assert signal_name(1) is None
    assert signal_name(0) is None


def test_artifacts_claimed_by_the_driver_are_rechecked() -> None:
    good = {"path": "a.txt", "size": 2, "media_type": "text/plain", "text": "hi"}
    image = {
        "path": "i.png",
        "size": 3,
        "media_type": "image/png",
        "is_image": True,
        "data_base64": base64.b64encode(b"abc").decode(),
    }
    bad = [
        {"path": "../escape", "size": 0, "media_type": "text/plain", "text": ""},
        {"path": "/abs", "size": 0, "media_type": "text/plain", "text": ""},
        {"path": "lie.txt", "size": 1, "media_type": "text/plain", "text": "longer"},
        {"path": "both", "size": 0, "media_type": "x", "text": "", "data_base64": ""},
        {"path": "b64", "size": 1, "media_type": "x", "data_base64": "!!"},
        {"path": "huge.txt", "size": 2000, "media_type": "text/plain", "text": "x" * 2000},
    ]
    done = parse_done(b"{}").model_copy(update={"artifacts": [good, image, *bad]})
    artifacts, notices = checked_artifacts(done, Limits(artifact_bytes=1000))
    assert [artifact.path for artifact in artifacts] == ["a.txt", "i.png"]
    assert len(notices) == len(bad)
    assert all("refused" in notice for notice in notices)
