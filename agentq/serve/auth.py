"""API keys, tenants and scopes.

`AGENTQ_API_KEYS` holds lines `KEY-HASH TENANT [SCOPE,SCOPE…]` (a path to a file of
them, or the lines inline, `;` also separating entries). A key hash is
`sha256:` + the hex SHA-256 of the key (`agentq hash-key KEY` prints it); keys
themselves are never stored. Without scopes a key has all of them but `metrics`.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request

from agentq.orchestrator.runs.index import DEFAULT_TENANT
from agentq.serve.errors import ApiError

# `workers`: lease and report the calls of remote tools (agentq/serve/remote.py).
# `metrics`: read `/metrics`, which counts every tenant's work: only a key naming it has it.
METRICS_SCOPE = "metrics"
SCOPES = frozenset({"runs:read", "runs:write", "approve", "workers", "tools:call", METRICS_SCOPE})
IMPLIED_SCOPES = SCOPES - {METRICS_SCOPE}  # a key listing no scopes
# A scope `tool:PATTERN` (fnmatch, e.g. `tool:search`, `tool:github:*`) limits the tools a
# key lists and calls (`/v1/tools`, the MCP gateway) to those matching one of its patterns.
TOOL_SCOPE_PREFIX = "tool:"


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    tenant: str
    scopes: frozenset[str]

    def may_call(self, *names: str) -> bool:
        """Whether the key may list and call a tool known by these names."""
        patterns = [s[len(TOOL_SCOPE_PREFIX) :] for s in self.scopes if s.startswith("tool:")]
        if not patterns:
            return True
        return any(fnmatch.fnmatchcase(n, p) for n in names for p in patterns)


OPEN = Principal(DEFAULT_TENANT, SCOPES)


@dataclass(frozen=True)
class KeyRing:
    by_hash: dict[str, Principal]

    def find(self, key: str) -> Principal | None:
        wanted = hash_key(key)
        for known, principal in self.by_hash.items():
            if hmac.compare_digest(known, wanted):
                return principal
        return None


def parse_keys(text: str) -> KeyRing:
    """Parse key lines; a bad line raises ValueError naming it."""
    entries: dict[str, Principal] = {}
    lines = [part.strip() for line in text.splitlines() for part in line.split(";")]
    for number, line in enumerate(lines, 1):
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) not in (2, 3) or not fields[0].startswith("sha256:"):
            raise ValueError(f"API key entry {number}: expected 'sha256:HEX TENANT [SCOPES]'")
        scopes = frozenset(fields[2].split(",")) if len(fields) == 3 else IMPLIED_SCOPES
        unknown = {s for s in scopes - SCOPES if not s.startswith(TOOL_SCOPE_PREFIX)}
        if unknown:
            raise ValueError(f"API key entry {number}: unknown scope {sorted(unknown)[0]!r}")
        entries[fields[0]] = Principal(fields[1], scopes)
    return KeyRing(entries)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # inline lines longer than a file name can be
        return False


def load_keys(value: str | None) -> KeyRing | None:
    """From $AGENTQ_API_KEYS: a file path or inline lines. None when no key is configured."""
    if not value or not value.strip():
        return None
    path = Path(value.strip())
    text = path.read_text() if "\n" not in value and _is_file(path) else value
    ring = parse_keys(text)
    return ring if ring.by_hash else None


def authenticate(request: Request, ring: KeyRing | None) -> Principal:
    if ring is None:
        return OPEN
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer":
        # A long-lived key never travels in a URL: browsers and URL-only clients use
        # short-lived tokens (agentq/serve/tokens.py).
        key = ""
    principal = ring.find(key.strip()) if key else None
    if principal is None:
        raise ApiError(
            401,
            "unauthorized",
            "a valid API key is required (Authorization: Bearer KEY)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return principal


def require(principal: Principal, scope: str) -> None:
    if scope not in principal.scopes:
        raise ApiError(403, "forbidden", f"this key lacks the {scope!r} scope")
