"""Real infrastructure for integration tests: a redis-server and agentq worker processes.

A missing component fails the test under CI (`CI=true`) and skips it elsewhere
with a reason that says how to get it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.waiting import GaveUp, eventually

REPO = Path(__file__).resolve().parents[2]


# The tools `agentq worker --tools TOOLS` serves in integration and end-to-end tests.
TOOLS = "tests/support/sample_tools.py"


def missing(what: str, how: str) -> None:
    message = f"{what} is not available; {how}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports. They are held open together while chosen:
    ports chosen one at a time, none of them listened on yet, may repeat (the kernel
    hands a just-closed port out again), and a server then fails to bind its own."""
    held = [socket.socket() for _ in range(count)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` itself listens on this TCP port. A free port is chosen
    before the server binds it, so another process can take it in between: then the
    port accepts connections, but they reach that process, and our server exits."""
    sockets: set[str] = set()
    fds = Path(f"/proc/{pid}/fd")
    try:
        names = list(fds.iterdir())
    except OSError:  # the process has exited
        return False
    for name in names:
        try:
            sockets.add(os.readlink(name))
        except OSError:  # closed while we read
            continue
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            ours = f"socket:[{inode}]" in sockets
            if ours and state == _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                return True
    return False


_LISTEN = "0A"  # a socket's state in /proc/net/tcp

# Attempts at starting a server on a port of our choosing before giving up.
PORT_ATTEMPTS = 5


class ServerExited(Exception):
    """A server process ended while starting (its port taken, or a bad argument)."""


class RedisServer:
    """A redis-server process on a free port; the fault suite kills, pauses and restarts it
    (same port, same directory, so an AOF survives a restart)."""

    def __init__(
        self, *, appendonly: bool = False, extra_args: Sequence[str] = (), port: int | None = None
    ) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            missing(
                "redis-server", "install it with `apt-get install -y redis-server` (.ci/run does)"
            )
        self.binary = str(binary)
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="agentq-redis-")
        self.appendonly = appendonly
        self.extra_args = list(extra_args)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self.start()
                return
            except ServerExited:
                if port is not None or attempt == PORT_ATTEMPTS:
                    raise
                self.port = free_port()  # (stop removed the directory)
                self.dir = tempfile.mkdtemp(prefix="agentq-redis-")

    def start(self) -> None:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "everysec",
            "--dir",
            self.dir,
            "--bind",
            "127.0.0.1",
            *self.extra_args,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            eventually(self._listening, "redis-server to listen", 10, 0.02)
        except (AssertionError, ServerExited):
            self.stop()
            raise

    def _listening(self) -> bool:
        """Whether this redis-server listens on its port (see `listens`)."""
        if self.proc.poll() is not None:
            raise ServerExited(f"redis-server exited with {self.proc.returncode} on {self.port}")
        return listens(self.proc.pid, self.port)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final save (what survives is what the AOF had)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def has_replica_acknowledging(self) -> bool:
        """Whether a replica acknowledges this primary's writes. Not the same as the
        replica's `master_link_status:up`: the primary starts streaming to a replica that
        synced without a disk (Redis 7's default) at its first ACK after the primary
        counted the sync done, and one sent before then is ignored: until the replica's
        next ACK, up to a second later, a WAIT with a short timeout falls short."""
        client = redis.Redis(port=self.port)
        try:
            client.incr("agentq-test:replica-probe")
            acked: Any = client.wait(1, 100)  # redis-py types sync replies loosely
            return int(acked) >= 1
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


class SilentServer:
    """Accepts TCP connections and never answers: a stalled Redis, or the wrong port."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)  # the kernel completes handshakes; nobody ever reads
        self.port: int = self.sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def close(self) -> None:
        self.sock.close()


class WorkerProcess:
    """`agentq worker` as a real process."""

    def __init__(
        self,
        redis_url: str,
        *args: str,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        full_env = {
            **os.environ,
            "AGENTQ_LEASE_S": "1",
            "AGENTQ_IDLE_POLL_S": "0.5",
            "PYTHONPATH": str(REPO),
            **(env or {}),
        }
        self.log_path = log_path or Path(
            tempfile.mkstemp(prefix="agentq-worker-", suffix=".log")[1]
        )
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentq", "worker", "--redis", redis_url, *args],
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the process holds still (its lease thread too) until `resume`."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def terminate(self) -> None:
        """SIGTERM without waiting: the worker drains."""
        self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


def wait_ready(*workers: WorkerProcess, timeout_s: float = 30) -> None:
    """Until every worker has announced itself; fails at once if one exited."""

    def started(worker: WorkerProcess) -> bool:
        if worker.proc.poll() is not None:
            raise AssertionError(f"worker exited:\n{worker.log()}")
        # Its start-up line, not an outage line ("agentq worker: redis unavailable").
        return re.search(r"^agentq worker \S+ on ", worker.log(), re.MULTILINE) is not None

    for worker in workers:  # they start side by side: the first wait covers most
        try:
            eventually(partial(started, worker), f"worker {worker.pid} to start", timeout_s)
        except GaveUp as gave_up:
            raise AssertionError(f"{gave_up}\n{worker.log()}") from None


def start_worker(redis_url: str, workers: list[WorkerProcess]) -> WorkerProcess:
    """An `agentq worker` serving the sample tools, ready, and stopped with `workers`."""
    worker = WorkerProcess(redis_url, "--tools", TOOLS)
    workers.append(worker)
    wait_ready(worker)
    return worker


def run_cli(
    *args: str,
    redis_url: str | None = None,
    timeout_s: float = 60,
    input_text: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    extra: Sequence[str] = ("--redis", redis_url) if redis_url else ()
    return subprocess.run(
        [sys.executable, "-m", "agentq", *args, *extra],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO,
        input=input_text,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
