"""A local Redis under Sentinel for tests: a primary, a replica and three
`redis-server --sentinel` processes (quorum 2) watching them as service `aq`.

The sentinels are tuned to fail over fast (a primary silent for `down_after_ms` is
down, a failover may be retried after `failover_timeout_ms`), so a test that SIGKILLs
the primary sees the replica promoted within a few seconds.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import redis

from tests.support.infra import RedisServer, free_ports, listens, missing
from tests.support.waiting import eventually

SERVICE = "aq"


class LocalSentinel:
    def __init__(
        self, *, down_after_ms: int = 1000, failover_timeout_ms: int = 3000, sentinels: int = 3
    ) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            missing("redis-server", "install it with `apt-get install -y redis-server`")
        assert binary is not None
        self.dir = Path(tempfile.mkdtemp(prefix="agentq-sentinel-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.primary = RedisServer()
        self.replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(self.primary.port)])
        self.ports = free_ports(sentinels)
        try:
            eventually(
                self.primary.has_replica_acknowledging, "the replica to acknowledge writes", 20
            )
            for port in self.ports:
                config = self.dir / f"sentinel-{port}.conf"  # sentinel rewrites its config
                config.write_text(
                    f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
                    f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                    f"sentinel down-after-milliseconds {SERVICE} {down_after_ms}\n"
                    f"sentinel failover-timeout {SERVICE} {failover_timeout_ms}\n"
                )
                self.procs.append(
                    subprocess.Popen(
                        [binary, str(config), "--sentinel"],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            for port, proc in zip(self.ports, self.procs, strict=True):
                eventually(partial(listens, proc.pid, port), f"sentinel :{port}", 10, 0.02)
            # A failover needs a quorum that knows the replica and each other (hello
            # messages go out every 2 s).
            eventually(self._watching, "the sentinels to know each other and the replica", 30)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, decode_responses=True, socket_timeout=2)

    def master_port(self) -> int | None:
        """The primary's port as a majority of the sentinels name it now."""
        named: list[int] = []
        for port in self.ports:
            try:
                address: Any = self.sentinel(port).sentinel_get_master_addr_by_name(  # type: ignore[no-untyped-call]
                    SERVICE
                )
            except redis.ConnectionError:
                continue
            if address:
                named.append(int(address[1]))
        winner = max(set(named), key=named.count, default=None)
        return winner if winner is not None and named.count(winner) >= 2 else None

    def promoted(self) -> bool:
        """Whether the replica is the primary now, for the sentinels and for itself."""
        if self.master_port() != self.replica.port:
            return False
        role: Any = redis.Redis(port=self.replica.port).role()
        return bool(role[0] == b"master")

    def _watching(self) -> bool:
        for port in self.ports:
            state: Any = self.sentinel(port).sentinel_master(SERVICE)  # type: ignore[no-untyped-call]
            if int(state["num-other-sentinels"]) < len(self.ports) - 1:
                return False
            if int(state["num-slaves"]) < 1:
                return False
        return True

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        self.replica.stop()
        self.primary.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
