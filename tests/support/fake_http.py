"""A real loopback HTTP server for provider fakes: records requests, answers scripted replies.

Each wire-format fake (fake_openai, fake_anthropic, …) turns its own scripted
"turns" into `Reply` objects; this module only does HTTP/1.1: JSON bodies,
and streamed bodies sent as chunked transfer encoding, one HTTP chunk per
piece, flushed, so the client really sees fragments arrive separately.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Self, TypeVar
from urllib.parse import parse_qs, urlsplit


@dataclass
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON, or the raw text if it was not JSON
    at: float = 0.0  # time.time() when the request was read, for counting rates

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": self.headers,
            "body": self.body,
            "at": self.at,
        }


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    # When set, the body is streamed: each piece is one HTTP chunk, written as the
    # iterable yields it (a generator may hold the stream open mid-way).
    pieces: Iterable[bytes] | None = None
    content_type: str = "application/json"

    @classmethod
    def json(cls, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        return cls(status=status, headers=dict(headers or {}), body=json.dumps(data).encode())

    @classmethod
    def sse(
        cls,
        events: list[tuple[str | None, Any]],
        *,
        headers: dict[str, str] | None = None,
        byte_split: int | None = None,
    ) -> Reply:
        """`events` are (event name or None, data); data that is not a str is JSON-encoded.
        `byte_split` re-cuts the stream into pieces of that many bytes, so that events and
        even UTF-8 characters straddle chunk boundaries."""
        pieces = [encode_sse(name, data) for name, data in events]
        if byte_split:
            joined = b"".join(pieces)
            pieces = [joined[i : i + byte_split] for i in range(0, len(joined), byte_split)]
        return cls(headers=dict(headers or {}), pieces=pieces, content_type="text/event-stream")


def encode_sse(name: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    lines = [f"event: {name}"] if name else []
    lines += [f"data: {line}" for line in text.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


Responder = Callable[[Recorded], Reply]


class FakeHTTPServer:
    """`with FakeHTTPServer(responder) as server:` serves on 127.0.0.1, a free port."""

    def __init__(self, responder: Responder, port: int = 0) -> None:
        self.responder = responder
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def __enter__(self) -> FakeHTTPServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def handle(self, recorded: Recorded) -> Reply:
        # One lock: replies are drawn from the script in the order requests arrive.
        with self._lock:
            self.requests.append(recorded)
            return self.responder(recorded)


def _handler_for(fake: FakeHTTPServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self._serve()

        def do_GET(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: tests assert on `requests`, not on logs

        def _serve(self) -> None:
            received_at = time.time()
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            split = urlsplit(self.path)
            recorded = Recorded(
                method=self.command,
                path=split.path,
                query=parse_qs(split.query),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                at=received_at,
            )
            try:
                reply = fake.handle(recorded)
            except Exception as exc:  # a broken script must show up, not hang the client
                reply = Reply.json({"error": {"message": f"fake server: {exc!r}"}}, status=500)
            self._write(reply)

        def _write(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("content-type", reply.content_type)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.pieces is None:
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
                self.wfile.flush()
                return
            self.send_header("transfer-encoding", "chunked")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            try:
                for piece in reply.pieces:
                    if piece:
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (deadline); nothing to do

    return Handler


TurnT = TypeVar("TurnT")


class ScriptedFake(Generic[TurnT]):
    """The shell every wire-format fake shares: request k gets the k-th scripted turn
    (or what a responder callable returns); past the script it answers 400, so a test
    fails fast rather than retrying. A subclass says how to route and render."""

    api_root: ClassVar[str] = "/v1"

    def __init__(
        self, script: Sequence[TurnT] | Callable[[Recorded], TurnT] = (), port: int = 0
    ) -> None:
        self._script: list[TurnT] | Callable[[Recorded], TurnT] = (
            script if callable(script) else list(script)
        )
        self._served = 0
        self.http = FakeHTTPServer(self._respond, port=port)
        # Other endpoints of the same API (its batch API): tried first, no turn consumed.
        self.routes: list[Callable[[Recorded], Reply | None]] = []

    @property
    def base_url(self) -> str:
        return self.http.url + self.api_root

    @property
    def requests(self) -> list[Recorded]:
        return self.http.requests

    def add(self, *turns: TurnT) -> None:
        """Append turns to a scripted list."""
        assert isinstance(self._script, list), "a responder callable has no list to add to"
        self._script.extend(turns)

    def __enter__(self) -> Self:
        self.http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.stop()

    def _respond(self, request: Recorded) -> Reply:
        for route in self.routes:
            routed = route(request)
            if routed is not None:
                return routed
        index = self._served
        self._served += 1
        refused = self.refuse(request)
        if refused is not None:
            return refused
        if callable(self._script):
            turn = self._script(request)
        elif index < len(self._script):
            turn = self._script[index]
        else:
            turn = self.exhausted(index)
        return self.render(turn, index, request)

    def refuse(self, request: Recorded) -> Reply | None:
        """An error reply for a request this API would not accept (wrong route, …)."""
        raise NotImplementedError

    def render(self, turn: TurnT, index: int, request: Recorded) -> Reply:
        raise NotImplementedError

    def exhausted(self, index: int) -> TurnT:
        """The turn that answers a request past the end of the script (a 400)."""
        raise NotImplementedError
