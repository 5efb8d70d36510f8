"""Host side of the driver protocol and result building (pure)."""

from __future__ import annotations

import json
import struct
import time

import pytest

from agentq.sandbox.errors import DriverProtocolError
from agentq.sandbox.models import ExecRequest, Limits
from agentq.sandbox.protocol import (
    ARTIFACT,
    DONE,
    MAX_NOTICES,
    READY,
    STDOUT,
    FrameDecoder,
    encode_request,
    frame_limits,
    parse_artifact,
    parse_done,
)
from agentq.sandbox.results import (
    ArtifactCollector,
    CappedBuffer,
    Observation,
    Outcome,
    build_artifact,
    build_result,
    signal_name,
)

pytestmark = pytest.mark.unit

REQUEST = ExecRequest(language="python", code="", limits=Limits(output_bytes=100))


def frame(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack(">I", len(payload)) + payload


def test_decoder_reassembles_frames_split_anywhere() -> None:
    stream = frame(STDOUT, b"hello") + frame(DONE, b'{"exit_code": 0}')
    decoder = FrameDecoder(frame_limits(REQUEST))
    frames = []
    for byte in stream:
        decoder.feed(bytes([byte]))
        while (item := decoder.next()) is not None:
            frames.append(item)
    assert frames == [(STDOUT, b"hello"), (DONE, b'{"exit_code": 0}')]


def test_decoder_rejects_unknown_kinds_and_oversized_frames() -> None:
    decoder = FrameDecoder(frame_limits(REQUEST))
    decoder.feed(frame(b"x", b""))
    with pytest.raises(DriverProtocolError, match="unexpected frame kind"):
        decoder.next()
    decoder = FrameDecoder(frame_limits(REQUEST))
    decoder.feed(DONE + struct.pack(">I", 1 << 30))  # only the header: never buffered
    with pytest.raises(DriverProtocolError, match="exceeds"):
        decoder.next()
    waiting = FrameDecoder(frame_limits(None))  # before the ready frame, nothing else
    waiting.feed(frame(STDOUT, b""))
    with pytest.raises(DriverProtocolError):
        waiting.next()


def test_a_chunk_of_many_empty_frames_decodes_in_linear_time() -> None:
    """The issue's flood: 200,000 empty frames in one chunk (it used to be quadratic)."""
    decoder = FrameDecoder(frame_limits(REQUEST))
    decoder.feed(b"o\0\0\0\0" * 200_000)
    started = time.process_time()
    count = 0
    while decoder.next() is not None:
        count += 1
    elapsed = time.process_time() - started
    print(f"decoded {count} empty frames in {elapsed:.3f} s of CPU")
    assert count == 200_000
    assert decoder.pending == 0


def test_request_is_one_ascii_json_line() -> None:
    request = ExecRequest(language="python", code="print('é\\x10')\n", files={"a": "\x10"})
    line = encode_request(request, "call-1")
    assert json.loads(line)["call"] == "call-1"
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert all(byte >= 0x20 for byte in line[:-1])  # no control byte reaches the driver raw


def test_parse_done_rejects_garbage_and_unbounded_lists() -> None:
    assert parse_done(b'{"exit_code": 2, "value": "3"}').exit_code == 2
    with pytest.raises(DriverProtocolError):
        parse_done(b"not json")
    notices = json.dumps({"notices": ["x"] * (MAX_NOTICES + 1)}).encode()
    with pytest.raises(DriverProtocolError):
        parse_done(notices)
    assert len(parse_done(b'{"notices": ["' + b"n" * 5000 + b'"]}').notices[0]) == 1000


def test_every_frame_kind_is_bounded_by_the_request() -> None:
    limits = frame_limits(REQUEST)
    assert set(limits) == {READY, STDOUT, b"e", ARTIFACT, DONE}
    assert limits[DONE] < 2_000_000  # a done frame no longer carries artifacts
    assert limits[ARTIFACT] < REQUEST.limits.artifact_bytes + 4096


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
        (observation(Outcome.FLOOD), None, "more output frames than its 10-byte output limit"),
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


def artifact_frame(header: dict[str, str], data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack(">H", len(raw)) + raw + data


def test_artifact_frames_are_split_and_their_headers_bounded() -> None:
    header, data = parse_artifact(artifact_frame({"path": "a.txt"}, b"hi"))
    assert (header.path, header.media_type, data) == ("a.txt", "application/octet-stream", b"hi")
    for payload in (
        b"\x00",
        struct.pack(">H", 5000) + b"{}",
        artifact_frame({"path": "x" * 2000}, b""),
        artifact_frame({"path": ""}, b""),
    ):
        with pytest.raises(DriverProtocolError):
            parse_artifact(payload)


def test_artifacts_are_built_by_the_host_from_raw_bytes() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
    assert build_artifact("i.png", "text/plain", png).media_type == "image/png"
    fake = build_artifact("f.png", "image/png", b"not an image")
    assert (fake.is_image, fake.media_type, fake.text) == (False, "text/plain", "not an image")
    binary = build_artifact("b.bin", "application/x-evil", b"\xff\x00")
    assert binary.media_type == "application/octet-stream"
    assert binary.text is None
    assert binary.data_base64 == "/wA="
    assert build_artifact("d.json", "application/json", b"{}").media_type == "application/json"


def test_artifact_collector_keeps_to_the_limits_and_bounds_its_notices() -> None:
    collector = ArtifactCollector(
        Limits(artifact_bytes=10, artifacts_total_bytes=15, max_artifacts=3)
    )
    collector.add("a.txt", "text/plain", b"x" * 10)
    collector.add("big.txt", "text/plain", b"x" * 11)  # over the item limit
    collector.add("b.txt", "text/plain", b"x" * 6)  # over the total
    collector.add("../escape", "text/plain", b"")
    collector.add(".", "text/plain", b"")
    collector.add("c.txt", "text/plain", b"x")
    collector.add("d.txt", "text/plain", b"x")
    assert [a.path for a in collector.artifacts] == ["a.txt", "c.txt", "d.txt"]
    for index in range(1000):
        collector.add(f"more{index}", "text/plain", b"")
    assert len(collector.notices) <= 16
    assert collector.too_many_frames
