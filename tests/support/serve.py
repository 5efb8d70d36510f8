"""`agentq serve` as a real process on a free loopback port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from tests.support.infra import PORT_ATTEMPTS, REPO, ServerExited, free_port, listens
from tests.support.waiting import GaveUp, eventually


class ServeProcess:
    def __init__(
        self,
        redis_url: str,
        *args: str,
        agents: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="agentq-serve-"))
        extra = list(args)
        if agents is not None:
            path = self.dir / "agents.json"
            path.write_text(json.dumps(agents))
            extra += ["--agents", str(path)]
        self.log_path = self.dir / "serve.log"
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self.port = free_port()
            self._start(redis_url, extra, env)
            try:
                self._wait_ready()
                return
            except ServerExited as exited:
                # Another process took the port between choosing and binding it.
                if "address already in use" not in str(exited) or attempt == PORT_ATTEMPTS:
                    raise AssertionError(str(exited)) from None

    def _start(self, redis_url: str, extra: list[str], env: dict[str, str] | None) -> None:
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentq",
                "serve",
                "--redis",
                redis_url,
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                *extra,
            ],
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _wait_ready(self, timeout_s: float = 30) -> None:
        def healthy() -> bool:
            if self.proc.poll() is not None:
                self._log.close()
                raise ServerExited(f"agentq serve exited:\n{self.log()}")
            if not listens(self.proc.pid, self.port):
                return False
            try:
                return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        try:
            eventually(healthy, "agentq serve to start", timeout_s)
        except GaveUp as gave_up:
            raise AssertionError(f"{gave_up}\n{self.log()}") from None

    def terminate(self) -> int:
        """SIGTERM, then the exit code (a graceful shutdown ends open streams first)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        finally:
            self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
