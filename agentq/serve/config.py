"""What one `agentq serve` process is configured with."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentq.serve.auth import KeyRing


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 1_000_000
    max_batch_bytes: int = 2_000_000_000  # a batch's JSONL body (spooled to disk)
    max_spec_bytes: int = 256_000
    submits_per_minute: int = 600  # per tenant, across every replica (counted in Redis)
    events_per_second: float = 1000.0  # per stream
    heartbeat_s: float = 15.0


@dataclass(frozen=True)
class ServeConfig:
    redis_url: str
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys: KeyRing | None = None
    cors_origins: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    mcp: bool = False  # serve the fleet's tools as an MCP server at /mcp (mcp_gateway.py)
    host: str = "127.0.0.1"  # the address served (the gateway guards loopback from rebinding)
    # Signs tokens and session cookies (tokens.py); unset, one is created in Redis once.
    token_secret: str | None = field(default=None, repr=False)
    token_ttl_s: float = 600.0  # the longest a token minted by POST /v1/tokens lives
    session_ttl_s: float = 8 * 3600.0  # the dashboard's session cookie


def load_agents(path: str | None) -> dict[str, dict[str, Any]]:
    """A JSON object of RunSpec templates, without 'prompt' or 'messages'."""
    if not path:
        return {}
    try:
        agents = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read agents file {path!r}: {exc}") from None
    if not isinstance(agents, dict) or not all(isinstance(v, dict) for v in agents.values()):
        raise ValueError(f"agents file {path!r}: expected an object of name -> spec template")
    for name, template in agents.items():
        for forbidden in ("prompt", "messages", "id"):
            if forbidden in template:
                raise ValueError(f"agents file {path!r}: {name}.{forbidden} is set per chat")
    return agents
