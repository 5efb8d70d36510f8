"""An HTTP server on a loopback port, in a thread, for the HTTP tool and webhooks: it
echoes requests, serves a large body, and redirects where a test asks."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class HttpTarget:
    def __init__(self) -> None:
        self.hits: list[str] = []
        target = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                target.hits.append(self.path)
                parts = urlsplit(self.path)
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length) if length else b""
                if parts.path == "/big":
                    self._reply(200, b"x" * 10_000, {"content-type": "text/plain"})
                elif parts.path == "/redirect":
                    location = parse_qs(parts.query)["to"][0]
                    self._reply(302, b"", {"location": location})
                else:
                    echo = {
                        "method": self.command,
                        "path": parts.path,
                        "query": parse_qs(parts.query),
                        "authorization": self.headers.get("authorization"),
                        "json": json.loads(body) if body else None,
                    }
                    self._reply(
                        200, json.dumps(echo).encode(), {"content-type": "application/json"}
                    )

            do_GET = do_POST = _handle

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
