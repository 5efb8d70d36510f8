"""A webhook receiver on a loopback port, in a thread: it records what it was sent and
answers from a script of (status, body) replies (the last one repeats)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self, replies: list[tuple[int, Any]] | None = None) -> None:
        self.replies = list(replies or [(200, {})])
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver.arrived:
                    receiver.received.append((dict(self.headers.items()), body))
                    n = len(receiver.received)
                    receiver.arrived.notify_all()
                status, reply = receiver.replies[min(n, len(receiver.replies)) - 1]
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, count: int, timeout_s: float = 60) -> list[tuple[dict[str, str], bytes]]:
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.received) >= count, timeout_s):
                raise AssertionError(f"{len(self.received)} of {count} deliveries arrived")
            return list(self.received)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
