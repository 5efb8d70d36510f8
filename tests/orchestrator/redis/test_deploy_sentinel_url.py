"""Sentinel URLs (`redis+sentinel://`), as the chart's external Redis may hold them."""

from __future__ import annotations

import pytest

from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.redis.connect import connect
from agentq.orchestrator.redis.sentinel import SentinelUrl, parse_sentinel_url

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        (
            "redis+sentinel://s1:26379,s2:26380/mymaster/2",
            SentinelUrl([("s1", 26379), ("s2", 26380)], "mymaster", 2),
        ),
        (
            "redis+sentinel://:p%40ss@sentinel/agentq",
            SentinelUrl([("sentinel", 26379)], "agentq", 0, None, "p@ss"),
        ),
        (
            "redis+sentinel://app:secret@[::1]:26379/agentq/0",
            SentinelUrl([("::1", 26379)], "agentq", 0, "app", "secret"),
        ),
        (
            "rediss+sentinel://:pw@s1:26379/aq/1?sentinel_username=s&sentinel_password=sp%40ss",
            SentinelUrl([("s1", 26379)], "aq", 1, None, "pw", True, "s", "sp@ss"),
        ),
        (
            "rediss+sentinel://s1/aq?ssl_ca_certs=/etc/ca.pem&ssl_cert_reqs=optional",
            SentinelUrl(
                [("s1", 26379)],
                "aq",
                tls=True,
                ssl_ca_certs="/etc/ca.pem",
                ssl_cert_reqs="optional",
            ),
        ),
    ],
)
def test_sentinel_urls_parse(url: str, parsed: SentinelUrl) -> None:
    assert parse_sentinel_url(url) == parsed


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel:///agentq", "no sentinel host"),
        ("redis+sentinel://s1:26379", "no service"),
        ("redis+sentinel://s1:port/agentq", "bad host:port"),
        ("redis+sentinel://s1/agentq/zero", "is not a number"),
        ("redis+sentinel://s1/agentq?password=x", "unknown option 'password'"),
        ("rediss+sentinel://s1/agentq?ssl_cert_reqs=maybe", "ssl_cert_reqs must be one of"),
    ],
)
def test_bad_sentinel_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_sentinel_url(url)


def test_sentinel_connections_get_the_same_timeouts_as_a_plain_url() -> None:
    """A master that accepts TCP and never answers costs a bounded wait, never a hang."""
    settings = Settings(redis_connect_timeout_s=1.5, redis_socket_timeout_s=9.0)
    plain = connect("redis://127.0.0.1:6379/0", settings).connection_pool.connection_kwargs
    sentinel = connect(
        "redis+sentinel://127.0.0.1:26379/agentq", settings
    ).connection_pool.connection_kwargs
    for name in ("socket_connect_timeout", "socket_timeout", "health_check_interval"):
        assert sentinel[name] == plain[name], name
    assert sentinel["socket_timeout"] == 9.0
    assert sentinel["socket_connect_timeout"] == 1.5
