"""A Sentinel URL reaches the master a real redis-sentinel names."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import redis

from agentq.orchestrator.redis.connect import connect, connect_sync
from tests.support.infra import RedisServer, free_port, free_ports, listens, missing
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
def sentinel(tmp_path: Path) -> Iterator[tuple[RedisServer, int]]:
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server", "install it with `apt-get install -y redis-server`")
    master = RedisServer()
    port = free_port()
    config = tmp_path / "sentinel.conf"  # sentinel rewrites its config: a file of its own
    config.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor agentq 127.0.0.1 {master.port} 1\n"
    )
    proc = subprocess.Popen(
        [str(binary), str(config), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually(lambda: listens(proc.pid, port), "redis-sentinel to listen", 10, 0.02)
        yield master, port
    finally:
        proc.terminate()
        proc.wait(10)
        master.stop()


async def test_a_sentinel_url_reaches_the_master(sentinel: tuple[RedisServer, int]) -> None:
    master, port = sentinel
    client = connect(f"redis+sentinel://127.0.0.1:{port}/agentq/3")
    try:
        await client.set("agentq:sentinel-check", "reached")
    finally:
        await client.aclose()
    direct = redis.Redis(port=master.port, db=3)
    assert direct.get("agentq:sentinel-check") == b"reached"


def test_sentinels_with_a_password_of_their_own(tmp_path: Path) -> None:
    """`?sentinel_password=` authenticates to the sentinels, the URL's password to the
    master: the two differ, and each is needed where it is used."""
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server", "install it with `apt-get install -y redis-server`")
    master = RedisServer(extra_args=["--requirepass", "master-pw"])
    port = free_port()
    config = tmp_path / "sentinel.conf"
    config.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\nrequirepass sentinel-pw\n"
        f"sentinel monitor agentq 127.0.0.1 {master.port} 1\n"
        "sentinel auth-pass agentq master-pw\n"
    )
    proc = subprocess.Popen(
        [str(binary), str(config), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually(lambda: listens(proc.pid, port), "redis-sentinel to listen", 10, 0.02)
        url = f"redis+sentinel://:master-pw@127.0.0.1:{port}/agentq/0"

        async def reach(url: str) -> None:
            client = connect(url)
            try:
                await client.set("agentq:sentinel-auth", "reached")
            finally:
                await client.aclose()

        asyncio.run(reach(f"{url}?sentinel_password=sentinel-pw"))
        sync = connect_sync(f"{url}?sentinel_password=sentinel-pw", socket_timeout=2)
        assert sync.get("agentq:sentinel-auth") == b"reached"
        with pytest.raises(redis.exceptions.ConnectionError):  # no master found without it
            asyncio.run(reach(url))
    finally:
        proc.terminate()
        proc.wait(10)
        master.stop()


def _certificates(where: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate it signed: (CA, certificate, key)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        missing("openssl", "install it with `apt-get install -y openssl`")
    assert openssl is not None
    ca, ca_key = where / "ca.crt", where / "ca.key"
    cert, key, csr = where / "server.crt", where / "server.key", where / "server.csr"
    for args in (
        [
            *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key)),
            *("-out", str(ca), "-days", "1", "-subj", "/CN=agentq-test-ca"),
        ],
        [
            *("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr)),
            *("-subj", "/CN=127.0.0.1"),
        ],
        [
            *("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key)),
            *("-CAcreateserial", "-out", str(cert), "-days", "1"),
        ],
    ):
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)
    return ca, cert, key


def test_a_rediss_sentinel_url_speaks_tls_to_the_sentinels_and_the_master(
    tmp_path: Path,
) -> None:
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server", "install it with `apt-get install -y redis-server`")
    assert binary is not None
    ca, cert, key = _certificates(tmp_path)
    tls = ["--tls-cert-file", str(cert), "--tls-key-file", str(key)]
    tls += ["--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no"]
    master_port, sentinel_port = free_ports(2)
    master = subprocess.Popen(
        [
            *(binary, "--port", "0", "--tls-port", str(master_port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(tmp_path), *tls),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    config = tmp_path / "sentinel.conf"
    config.write_text(
        f"port 0\ntls-port {sentinel_port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {ca}\n"
        "tls-auth-clients no\ntls-replication yes\n"
        f"sentinel monitor agentq 127.0.0.1 {master_port} 1\n"
    )
    sentinel = subprocess.Popen(
        [binary, str(config), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for proc, port in ((master, master_port), (sentinel, sentinel_port)):
            eventually(partial(listens, proc.pid, port), "a TLS port to listen", 10, 0.02)
        url = f"rediss+sentinel://127.0.0.1:{sentinel_port}/agentq/0?ssl_ca_certs={ca}"

        async def reach() -> None:
            client = connect(url)
            try:
                await client.set("agentq:sentinel-tls", "reached")
            finally:
                await client.aclose()

        asyncio.run(reach())
        assert connect_sync(url, socket_timeout=2).get("agentq:sentinel-tls") == b"reached"
        direct = redis.Redis(port=master_port, ssl=True, ssl_ca_certs=str(ca))
        assert direct.get("agentq:sentinel-tls") == b"reached"
    finally:
        for proc in (sentinel, master):
            proc.terminate()
            proc.wait(10)
