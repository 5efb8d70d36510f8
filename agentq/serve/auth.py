"""API keys: tenant keys and worker keys, and the scopes each may hold.

`AGENTQ_API_KEYS` holds lines (a path to a file of them, or the lines inline, `;` also
separating entries), one per key:

    sha256:HEX TENANT [SCOPE,SCOPE…]           a tenant key
    sha256:HEX worker:NAME queue:Q[,queue:Q…]   a worker key, for the queues it may lease

A key hash is `sha256:` + the hex SHA-256 of the key (`agentq hash-key KEY` prints it);
keys themselves are never stored. A tenant key without scopes has every tenant scope; a
worker key has only what it names; `admin` and `metrics`, only a key that names them.
Leasing forwarded calls is a worker's right, never a tenant's: those calls carry other
tenants' inputs (agentq/serve/remote.py).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from fastapi import Request

from agentq.orchestrator.core.run_ids import DEFAULT_TENANT
from agentq.serve.errors import ApiError


class KeyKind(StrEnum):
    TENANT = "tenant"  # submits and reads its own tenant's runs, calls and batches
    WORKER = "worker"  # leases the calls of the queues it names, for every tenant


# What a tenant key holds when its line names no scopes.
TENANT_SCOPES = frozenset({"runs:read", "runs:write", "approve", "tools:call"})
# The fleet's shape across tenants (/v1/fleet, /v1/queues): granted by name only.
ADMIN = "admin"
# `metrics`: read `/metrics`, which counts every tenant's work: granted by name only.
METRICS_SCOPE = "metrics"
# Scopes any kind of key holds when its line names them, and never otherwise.
NAMED_SCOPES = frozenset({ADMIN, METRICS_SCOPE})
# A scope `tool:PATTERN` (fnmatch, e.g. `tool:search`, `tool:github:*`) limits the tools a
# key lists and calls (`/v1/tools`, the MCP gateway) to those matching one of its patterns.
TOOL_SCOPE_PREFIX = "tool:"
# A worker key's `queue:NAME` scopes name the queues it leases; `queue:*` is every queue.
QUEUE_SCOPE_PREFIX = "queue:"
ANY_QUEUE = QUEUE_SCOPE_PREFIX + "*"
WORKER_PREFIX = "worker:"


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def queue_scope(queue: str) -> str:
    return QUEUE_SCOPE_PREFIX + queue


@dataclass(frozen=True)
class Principal:
    tenant: str  # "" for a worker key: it acts for no tenant
    scopes: frozenset[str]
    kind: KeyKind = KeyKind.TENANT
    # Names the key in what it leaves behind (the holder of a lease it takes): its
    # entry's owner and the start of its hash, never the key.
    key_id: str = ""

    def may_call(self, *names: str) -> bool:
        """Whether the key may list and call a tool known by these names."""
        patterns = [s[len(TOOL_SCOPE_PREFIX) :] for s in self.scopes if s.startswith("tool:")]
        if not patterns:
            return True
        return any(fnmatch.fnmatchcase(n, p) for n in names for p in patterns)

    @property
    def may_lease_any(self) -> bool:
        """Whether the key leases forwarded calls at all (a worker key does)."""
        return any(s.startswith(QUEUE_SCOPE_PREFIX) for s in self.scopes)

    def may_lease(self, queue: str) -> bool:
        return queue_scope(queue) in self.scopes or ANY_QUEUE in self.scopes

    # The lease holder of workers/tools/remote.py: a lease stores the id of the key that
    # took it, and only that key may act on it; a pushed call's lease is held by its
    # queue (`queue:NAME`), so a key that may lease the queue may answer it.
    @property
    def holder_id(self) -> str:
        return self.key_id

    def holds(self, holder_id: str) -> bool:
        if holder_id.startswith(QUEUE_SCOPE_PREFIX):
            return self.may_lease(holder_id[len(QUEUE_SCOPE_PREFIX) :])
        return bool(self.key_id) and hmac.compare_digest(holder_id, self.key_id)


# Without keys (loopback only, or --insecure) nobody is told apart: every scope.
OPEN = Principal(DEFAULT_TENANT, TENANT_SCOPES | NAMED_SCOPES | {ANY_QUEUE}, key_id="open")


@dataclass(frozen=True)
class KeyRing:
    by_hash: dict[str, Principal]

    def find(self, key: str) -> Principal | None:
        wanted = hash_key(key)
        for known, principal in self.by_hash.items():
            if hmac.compare_digest(known, wanted):
                return principal
        return None


def _scopes(kind: KeyKind, listed: str | None) -> frozenset[str]:
    """A key's scopes, or ValueError saying what is wrong with them."""
    if listed is None:
        if kind is KeyKind.WORKER:
            raise ValueError("a worker key names the queues it may lease (queue:NAME)")
        return TENANT_SCOPES
    scopes = frozenset(s for s in listed.split(",") if s)
    for scope in sorted(scopes):
        if scope in NAMED_SCOPES:
            continue
        if kind is KeyKind.WORKER and not scope.startswith(QUEUE_SCOPE_PREFIX):
            raise ValueError(f"a worker key holds queue:NAME scopes only, not {scope!r}")
        if kind is KeyKind.TENANT:
            if scope.startswith(QUEUE_SCOPE_PREFIX) or scope == "workers":
                raise ValueError(
                    f"a tenant key cannot hold {scope!r}: leasing is for worker keys "
                    "('sha256:HEX worker:NAME queue:QUEUE')"
                )
            if scope not in TENANT_SCOPES and not scope.startswith(TOOL_SCOPE_PREFIX):
                raise ValueError(f"unknown scope {scope!r}")
    if kind is KeyKind.WORKER and not any(s.startswith(QUEUE_SCOPE_PREFIX) for s in scopes):
        raise ValueError("a worker key names the queues it may lease (queue:NAME)")
    return scopes


def _principal(key_hash: str, owner: str, listed: str | None) -> Principal:
    key_id = f"{owner}#{key_hash.removeprefix('sha256:')[:12]}"
    if owner.startswith(WORKER_PREFIX):
        if not owner[len(WORKER_PREFIX) :]:
            raise ValueError("a worker key needs a name ('worker:NAME')")
        return Principal("", _scopes(KeyKind.WORKER, listed), KeyKind.WORKER, key_id)
    if ":" in owner:
        raise ValueError(f"a tenant's name has no ':' ({owner!r}; a worker key is 'worker:NAME')")
    return Principal(owner, _scopes(KeyKind.TENANT, listed), KeyKind.TENANT, key_id)


def parse_keys(text: str) -> KeyRing:
    """Parse key lines; a bad line raises ValueError naming it, on one line."""
    entries: dict[str, Principal] = {}
    lines = [part.strip() for line in text.splitlines() for part in line.split(";")]
    for number, line in enumerate(lines, 1):
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) not in (2, 3) or not fields[0].startswith("sha256:"):
            raise ValueError(
                f"API key entry {number}: expected 'sha256:HEX TENANT [SCOPES]' "
                "or 'sha256:HEX worker:NAME queue:QUEUE[,…]'"
            )
        if fields[0] in entries:
            raise ValueError(f"API key entry {number}: this key hash is listed twice")
        try:
            listed = fields[2] if len(fields) == 3 else None
            entries[fields[0]] = _principal(fields[0], fields[1], listed)
        except ValueError as exc:
            raise ValueError(f"API key entry {number}: {exc}") from None
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
