"""Running the app under uvicorn: loopback unless keys are configured, clean shutdown."""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from types import FrameType

import uvicorn
from sse_starlette.sse import AppStatus

from agentq.orchestrator import tracing
from agentq.serve.app import create_app
from agentq.serve.config import ServeConfig
from agentq.serve.follow import start_draining


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(
                ipaddress.ip_address(info[4][0]).is_loopback
                for info in socket.getaddrinfo(host, None)
            )
        except OSError:
            return False


def refusal(config: ServeConfig, host: str, insecure: bool) -> str | None:
    """Why this bind is refused, or None: without keys, only loopback (or --insecure)."""
    if config.keys is None and not is_loopback(host) and not insecure:
        return (
            f"refusing to serve {host} without API keys: set AGENTQ_API_KEYS, "
            "bind to 127.0.0.1, or pass --insecure"
        )
    return None


def serve(config: ServeConfig, host: str, port: int, *, log_level: str = "info") -> None:
    """Serve until SIGTERM/SIGINT; open event streams end so the process can stop."""
    # Our streams end themselves on shutdown (see follow.start_draining); sse-starlette's
    # own drain would cancel them mid-body.
    AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]
    # Before the app is made: its door spans go on this provider (door_spans.py).
    tracing.setup_tracing("agentq-serve")
    uv_config = uvicorn.Config(
        create_app(config),
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=10,
        proxy_headers=False,
    )
    # uvicorn.Config set its loggers up: the filter goes on after.
    logging.getLogger("uvicorn.access").addFilter(RedactCredentials())
    try:
        _DrainingServer(uv_config).run()
    finally:
        tracing.shutdown_tracing()  # the last spans are exported before the process ends


# A URL may carry a token (EventSource, MCP clients without headers); a key never
# works there, but a client may still send one. Neither reaches the access log.
_CREDENTIAL = re.compile(r"(?i)([?&](?:token|key|api_key|access_token)=)[^&\s]*")


def redact(path: str) -> str:
    return _CREDENTIAL.sub(r"\1REDACTED", path)


class RedactCredentials(logging.Filter):
    """uvicorn's access record is (client, method, path with query, HTTP version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) >= 3:
            args = list(record.args)
            args[2] = redact(str(args[2]))
            record.args = tuple(args)
        return True


class _DrainingServer(uvicorn.Server):
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        start_draining()
        super().handle_exit(sig, frame)
