"""A local Redis Cluster for tests: three primaries (`redis-server --cluster-enabled yes`
on free ports, in temp dirs) joined by `redis-cli --cluster create`, with `replicas`
replicas per primary (none by default). `node_timeout_ms` is `cluster-node-timeout`: how
long a primary is unreachable before its replica is elected (Redis's default: 15 s)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import redis
import redis.cluster

from tests.support.infra import free_ports, listens, missing
from tests.support.waiting import eventually


class LocalCluster:
    def __init__(
        self, primaries: int = 3, replicas: int = 0, node_timeout_ms: int | None = None
    ) -> None:
        server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
        if server is None or cli is None:
            missing(
                "redis-server and redis-cli",
                "install them with `apt-get install -y redis-server` (.ci/run does)",
            )
        assert server is not None
        assert cli is not None
        self.dir = Path(tempfile.mkdtemp(prefix="agentq-cluster-"))
        nodes = primaries * (1 + replicas)
        # A node's port and its bus port, all distinct (see free_ports).
        chosen = free_ports(2 * nodes)
        self.ports, bus_ports = chosen[:nodes], chosen[nodes:]
        self.procs: list[subprocess.Popen[bytes]] = []
        try:
            for port, bus_port in zip(self.ports, bus_ports, strict=True):
                node_dir = self.dir / str(port)
                node_dir.mkdir()
                self.procs.append(
                    subprocess.Popen(
                        [
                            *(server, "--port", str(port), "--bind", "127.0.0.1"),
                            *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                            # The bus port (port + 10000 by default) may be taken or > 65535.
                            *("--cluster-port", str(bus_port)),
                            *("--save", "", "--appendonly", "no", "--dir", str(node_dir)),
                            *(
                                ("--cluster-node-timeout", str(node_timeout_ms))
                                if node_timeout_ms
                                else ()
                            ),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            for port, proc in zip(self.ports, self.procs, strict=True):
                eventually(partial(listens, proc.pid, port), f"redis-server :{port}", 10, 0.02)
            subprocess.run(
                [
                    *(cli, "--cluster", "create"),
                    *(f"127.0.0.1:{port}" for port in self.ports),
                    *("--cluster-replicas", str(replicas), "--cluster-yes"),
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )
            for port in self.ports:
                eventually(partial(self.ok, port), f"cluster_state:ok on :{port}", 30, 0.05)
            eventually(self.replicas_acknowledging, "every replica to acknowledge writes", 30, 0.05)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def node(self, port: int) -> redis.Redis:
        """A plain client of one node (it answers for its own slots only)."""
        return redis.Redis(port=port, decode_responses=True)

    def ok(self, port: int) -> bool:
        return "cluster_state:ok" in str(self._command(port, "CLUSTER", "INFO"))

    def replication(self, port: int) -> dict[str, Any]:
        info: dict[str, Any] = self.node(port).info("replication")  # type: ignore[assignment]
        return info

    def replica_ports(self) -> list[int]:
        return [p for p in self.ports if self.replication(p)["role"] == "slave"]

    def replica_of(self, primary: int) -> int:
        """The port of `primary`'s replica."""
        for port in self.replica_ports():
            if int(self.replication(port)["master_port"]) == primary:
                return port
        raise AssertionError(f"no replica follows :{primary}")

    def is_primary(self, port: int) -> bool:
        """Whether the node on `port` is a primary, for itself and for the cluster."""
        return self.replication(port)["role"] == "master" and self.ok(port)

    def kill(self, port: int) -> None:
        """SIGKILL the node on `port` (it stays down)."""
        self.procs[self.ports.index(port)].send_signal(signal.SIGKILL)

    def replicas_acknowledging(self) -> bool:
        """Whether each primary's writes are acknowledged by a replica. A replica's own
        `master_link_status:up` can come before its primary streams to it (infra.py:
        `RedisServer.has_replica_acknowledging`)."""
        replicas = self.replica_ports()
        if not replicas:
            return True
        for primary in (p for p in self.ports if p not in replicas):
            probes = (f"agentq-test:replica-probe:{{{i}}}" for i in range(10_000))
            key = next(k for k in probes if self.owner(k) == primary)  # one of its slots
            node = self.node(primary)
            node.incr(key)
            acked: Any = node.wait(1, 100)  # redis-py types sync replies loosely
            if int(acked) < 1:
                return False
        return True

    def pause_replicas(self) -> None:
        """SIGSTOP every replica: a WAIT on any primary hears from none."""
        for port in self.replica_ports():
            self.procs[self.ports.index(port)].send_signal(signal.SIGSTOP)

    def resume_replicas(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGCONT)

    def _command(self, port: int, *args: str) -> Any:
        return self.node(port).execute_command(*args)  # type: ignore[no-untyped-call]

    def client(self) -> redis.cluster.RedisCluster:
        """A cluster-aware client (routes each key to its node)."""
        client: redis.cluster.RedisCluster = redis.cluster.RedisCluster(
            host="127.0.0.1", port=self.ports[0], decode_responses=True
        )
        return client

    def owner(self, key: str) -> int:
        """The port of the primary that serves `key`'s slot (asked of a live node)."""
        port = next(
            p for p, proc in zip(self.ports, self.procs, strict=True) if proc.poll() is None
        )
        slot = int(self._command(port, "CLUSTER", "KEYSLOT", key))
        for start, end, primary, *_ in self._command(port, "CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return int(primary[1])
        raise AssertionError(f"no node serves slot {slot}")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
