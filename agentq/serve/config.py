"""What one `agentq serve` process is configured with."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.tools.remote import RemoteTools
from agentq.serve.auth import KeyRing


@dataclass(frozen=True)
class Limits:
    """Every limit of the HTTP doors; each is `AGENTQ_SERVE_<NAME>` (docs/security.md,
    "Limits", says what each covers and what a client sees past it)."""

    max_body_bytes: int = 1_000_000
    max_batch_bytes: int = 200_000_000  # a batch's JSONL body (spooled to disk)
    max_batch_lines: int = 100_000  # per batch
    max_spec_bytes: int = 256_000  # a run spec, and each batch line
    # Per tenant, across every replica (counted in Redis): the lines of its batches. (Its
    # submissions are the deployment's AGENTQ_SUBMITS_PER_MINUTE: workers count them too.)
    batch_lines_per_minute: int = 200_000
    events_per_second: float = 1000.0  # per stream
    heartbeat_s: float = 15.0
    # Redis connections of the process: followers share one read per partition and lease
    # long-polls one per queue, so this bounds the process whatever its callers hold.
    redis_connections: int = 32
    # How long a request waits its turn for one of them (first come, first served) before
    # it is answered 429 `redis_connections`: a queue behind other requests' commands, not
    # a Redis that does not answer (that is the connect and socket timeouts' 503).
    redis_wait_s: float = 30.0
    max_streams: int = 10_000  # event streams, `?wait=` and long-polls held by the process
    streams_per_tenant: int = 1_000  # ... and by one tenant
    list_scan_runs: int = 2_000  # the runs one filtered `GET /v1/runs` reads at most
    depth_sample_s: float = 5.0  # how often the console's queue depths are sampled


@dataclass(frozen=True)
class ServeConfig:
    redis_url: str
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys: KeyRing | None = None
    # Read before serving, so that a bad variable or file is refused in one line.
    settings: Settings = field(default_factory=Settings)
    remote_tools: RemoteTools = field(default_factory=RemoteTools)
    cors_origins: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    mcp: bool = False  # serve the fleet's tools as an MCP server at /mcp (mcp_gateway.py)
    host: str = "127.0.0.1"  # the address served (the gateway guards loopback from rebinding)
    # Signs tokens and session cookies (tokens.py); unset, one is created in Redis once.
    token_secret: str | None = field(default=None, repr=False)
    token_ttl_s: float = 600.0  # the longest a token minted by POST /v1/tokens lives
    session_ttl_s: float = 8 * 3600.0  # the dashboard's session cookie


def limits_from_env(environ: Mapping[str, str]) -> Limits:
    """The limits, each overridden by `AGENTQ_SERVE_<NAME>` when set."""
    overrides: dict[str, Any] = {}
    for limit in dataclasses.fields(Limits):
        variable = f"AGENTQ_SERVE_{limit.name.upper()}"
        if variable in environ:
            kind = float if limit.type == "float" else int
            try:
                value = kind(environ[variable])
            except ValueError:
                raise ValueError(f"{variable}: not a number: {environ[variable]!r}") from None
            if value <= 0:
                raise ValueError(f"{variable}: must be above 0, not {environ[variable]}")
            overrides[limit.name] = value
    return Limits(**overrides)


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
