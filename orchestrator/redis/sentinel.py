"""Redis Sentinel URLs: `redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]`.

The sentinels are asked which server is the master of `service`; the password (and
user) authenticate to that master, as in a plain `redis://` URL. A failover moves the
connections to the new master; a command in flight during it fails like a dropped
connection (and is retried where a dropped connection is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

SCHEME = "redis+sentinel://"
DEFAULT_SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelUrl:
    sentinels: list[tuple[str, int]]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def is_sentinel_url(url: str) -> bool:
    return url.startswith(SCHEME)


def parse_sentinel_url(url: str) -> SentinelUrl:
    """Parse `url`; a ValueError names what is wrong."""
    rest = url.removeprefix(SCHEME)
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
    return SentinelUrl(
        sentinels=sentinels,
        service=unquote(service),
        db=int(db or 0),
        username=unquote(username) or None,
        password=unquote(password) or None,
    )


def sentinel_pool(url: str, **connection: Any) -> SentinelConnectionPool:
    """A connection pool to the current master of the URL's service. `connection`: the
    master connections' timeouts and health checks, as for a plain `redis://` URL, so a
    master that accepts TCP and never answers costs a bounded wait, never a hang."""
    parsed = parse_sentinel_url(url)
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        parsed.sentinels,
        socket_timeout=5.0,
        socket_connect_timeout=connection.get("socket_connect_timeout", 5.0),
    )
    return SentinelConnectionPool(  # type: ignore[no-untyped-call]
        parsed.service,
        sentinel,
        db=parsed.db,
        username=parsed.username,
        password=parsed.password,
        **connection,
    )
