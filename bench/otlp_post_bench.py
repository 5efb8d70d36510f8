"""What posting one batch of spans costs the exporting process: httpx, the standard
library's http.client, and agentq's `WireSpanExporter` (which posts with http.client).

    python bench/otlp_post_bench.py [--posts N] [--kb K]

A sink in another process reads and discards each post. It answers HTTP/1.1 (the
connection is kept, as an OpenTelemetry Collector keeps it) in one round and HTTP/1.0
(a connection a post) in the other. Each client posts the same K KB body 20 times to
warm up, then N times; the figure is this process's CPU (user + system) per post.
The exporter is timed without its encoding (its retry loop, transport and reads only).
Never asserts on time.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import socket
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx

from agentq.orchestrator.tracing.otlp_export import WireSpanExporter

WARM_UP = 20


def _sink(port: int, protocol: str) -> None:
    class Sink(BaseHTTPRequestHandler):
        protocol_version = protocol

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()


def _cpu_us_per_post(post: Callable[[], object], posts: int) -> float:
    for _ in range(WARM_UP):
        post()
    start = time.process_time()
    for _ in range(posts):
        post()
    return (time.process_time() - start) / posts * 1e6


def _listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _round(protocol: str, body: bytes, posts: int) -> str:
    headers = {"Content-Type": "application/x-protobuf"}
    port = _free_port()
    sink = mp.get_context("spawn").Process(target=_sink, args=(port, protocol), daemon=True)
    sink.start()
    try:
        _listening(port)
        url = f"http://127.0.0.1:{port}/v1/traces"
        with httpx.Client(headers=headers) as client:
            via_httpx = _cpu_us_per_post(lambda: client.post(url, content=body), posts)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

        def raw() -> None:
            connection.request("POST", "/v1/traces", body, headers)
            connection.getresponse().read()

        via_http_client = _cpu_us_per_post(raw, posts)
        connection.close()
        exporter = WireSpanExporter(endpoint=url, environ={})
        via_exporter = _cpu_us_per_post(lambda: exporter._export(body, 1), posts)
        exporter.shutdown()
    finally:
        sink.terminate()
        sink.join()
    return (
        f"  sink {protocol}: httpx {via_httpx:.0f}, http.client {via_http_client:.0f}, "
        f"WireSpanExporter {via_exporter:.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=300)
    parser.add_argument("--kb", type=int, default=150)
    args = parser.parse_args()
    print(f"CPU of this process per post of {args.kb} KB, {args.posts} posts (us)")
    for protocol in ("HTTP/1.1", "HTTP/1.0"):
        print(_round(protocol, b"x" * (args.kb * 1000), args.posts))


if __name__ == "__main__":
    main()
