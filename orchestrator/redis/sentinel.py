"""Redis Sentinel URLs:
`redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db][?sentinel_password=P]`
(`rediss+sentinel://` for TLS to the sentinels and the master, with `ssl_ca_certs=FILE`
for a private CA and `ssl_cert_reqs=required|optional|none`).

The sentinels are asked which server is the master of `service`; the password (and
user) authenticate to that master, as in a plain `redis://` URL. Sentinels that require
a password of their own (`requirepass` in sentinel.conf) get `sentinel_password` (and
`sentinel_username`). A failover moves the connections to the new master: every new
connection asks the sentinels where the master is, and a command in flight during it
fails like a dropped connection (and is retried where a dropped connection is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

import redis
import redis.sentinel
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

SCHEMES = ("redis+sentinel://", "rediss+sentinel://")
DEFAULT_SENTINEL_PORT = 26379
_QUERY = ("sentinel_password", "sentinel_username", "ssl_ca_certs", "ssl_cert_reqs")
_CERT_REQS = ("required", "optional", "none")
# Asking a sentinel is one small command: a sentinel that does not answer this fast is
# skipped for the next one in the list.
_SENTINEL_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class SentinelUrl:
    sentinels: list[tuple[str, int]]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    ssl_ca_certs: str | None = None
    ssl_cert_reqs: str | None = None


def is_sentinel_url(url: str) -> bool:
    return url.lower().startswith(SCHEMES)


def parse_sentinel_url(url: str) -> SentinelUrl:
    """Parse `url`; a ValueError names what is wrong."""
    scheme, _, rest = url.partition("://")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    credentials, _, hosts = netloc.rpartition("@")
    username, _, password = credentials.partition(":") if credentials else ("", "", "")
    sentinels: list[tuple[str, int]] = []
    for entry in filter(None, hosts.split(",")):
        host, _, port = entry.rpartition(":") if ":" in entry else (entry, "", "")
        if not host or (port and not port.isdigit()):
            raise ValueError(f"sentinel URL: bad host:port {entry!r}")
        sentinels.append((host.strip("[]"), int(port) if port else DEFAULT_SENTINEL_PORT))
    if not sentinels:
        raise ValueError("sentinel URL: no sentinel host")
    service, _, db = path.partition("/")
    if not service:
        raise ValueError("sentinel URL: no service (master) name after the hosts")
    if db and not db.isdigit():
        raise ValueError(f"sentinel URL: database {db!r} is not a number")
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - set(_QUERY))
    if unknown:
        raise ValueError(
            f"sentinel URL: unknown option {unknown[0]!r} (known: {', '.join(_QUERY)})"
        )
    cert_reqs = options.get("ssl_cert_reqs", [""])[-1] or None
    if cert_reqs is not None and cert_reqs not in _CERT_REQS:
        raise ValueError(f"sentinel URL: ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}")
    return SentinelUrl(
        sentinels=sentinels,
        service=unquote(service),
        db=int(db or 0),
        username=unquote(username) or None,
        password=unquote(password) or None,
        tls=scheme.lower() == "rediss+sentinel",
        sentinel_username=options.get("sentinel_username", [""])[-1] or None,
        sentinel_password=options.get("sentinel_password", [""])[-1] or None,
        ssl_ca_certs=options.get("ssl_ca_certs", [""])[-1] or None,
        ssl_cert_reqs=cert_reqs,
    )


def _tls(parsed: SentinelUrl) -> dict[str, Any]:
    """The URL's TLS options, for the sentinels and the master alike."""
    if not parsed.tls:
        return {}
    options: dict[str, Any] = {"ssl": True}
    if parsed.ssl_ca_certs is not None:
        options["ssl_ca_certs"] = parsed.ssl_ca_certs
    if parsed.ssl_cert_reqs is not None:
        options["ssl_cert_reqs"] = parsed.ssl_cert_reqs
    return options


def _sentinel_options(parsed: SentinelUrl, connection: dict[str, Any]) -> dict[str, Any]:
    """How to reach the sentinels themselves: their own credentials, the URL's TLS."""
    return {
        "socket_timeout": _SENTINEL_TIMEOUT_S,
        "socket_connect_timeout": connection.get("socket_connect_timeout", _SENTINEL_TIMEOUT_S),
        "username": parsed.sentinel_username,
        "password": parsed.sentinel_password,
        **_tls(parsed),
    }


def _master_options(parsed: SentinelUrl, connection: dict[str, Any]) -> dict[str, Any]:
    return {
        "db": parsed.db,
        "username": parsed.username,
        "password": parsed.password,
        **_tls(parsed),
        **connection,
    }


def sentinel_pool(url: str, **connection: Any) -> SentinelConnectionPool:
    """A connection pool to the current master of the URL's service. `connection`: the
    master connections' timeouts and health checks, as for a plain `redis://` URL, so a
    master that accepts TCP and never answers costs a bounded wait, never a hang."""
    parsed = parse_sentinel_url(url)
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        parsed.sentinels, sentinel_kwargs=_sentinel_options(parsed, connection)
    )
    return SentinelConnectionPool(  # type: ignore[no-untyped-call]
        parsed.service, sentinel, **_master_options(parsed, connection)
    )


def sentinel_sync_client(url: str, **connection: Any) -> redis.Redis:
    """A blocking client to the current master (a thread's own, e.g. the lease renewer's);
    it follows a failover as the async pool does."""
    parsed = parse_sentinel_url(url)
    sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        parsed.sentinels, sentinel_kwargs=_sentinel_options(parsed, connection)
    )
    pool = redis.sentinel.SentinelConnectionPool(  # type: ignore[no-untyped-call]
        parsed.service, sentinel, **_master_options(parsed, connection)
    )
    return redis.Redis(connection_pool=pool)
