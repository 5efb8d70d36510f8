"""Arize Phoenix (an LLM trace viewer, PyPI `arize-phoenix`) as a real process on free
ports, with its SQLite store in a temporary directory, read back through its REST API."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.infra import free_ports, missing
from tests.support.waiting import GaveUp, eventually

START_TIMEOUT_S = 240.0  # the first start runs its database migrations: ~60 s here


class Phoenix:
    def __init__(self) -> None:
        binary = (
            os.environ.get("AGENTQ_PHOENIX_BIN")
            or shutil.which("phoenix")
            or str(Path(sys.executable).with_name("phoenix"))
        )
        if not Path(binary).exists():
            missing(
                "arize-phoenix",
                "install it with `pip install -e '.[test]'` (.ci/run does), or point "
                "AGENTQ_PHOENIX_BIN at the `phoenix` command of another environment",
            )
        self.port, grpc_port = free_ports(2)
        self.dir = tempfile.mkdtemp(prefix="agentq-phoenix-")
        self.log_path = Path(self.dir) / "phoenix.log"
        self._log = self.log_path.open("wb")
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": self.dir,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(grpc_port),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        self.proc = subprocess.Popen(
            [binary, "serve"], env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.started_s = self._wait_healthy()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def otlp_endpoint(self) -> str:
        return f"{self.url}/v1/traces"

    def _wait_healthy(self) -> float:
        def healthy() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"phoenix exited:\n{self.log_path.read_text()[-3000:]}")
            try:
                return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        began = time.monotonic()
        try:
            eventually(healthy, "phoenix to become healthy", START_TIMEOUT_S, 0.25)
        except GaveUp:
            self.stop()
            raise
        return time.monotonic() - began

    def spans(self, trace_id: str, project: str = "default") -> list[dict[str, Any]]:
        reply = httpx.get(
            f"{self.url}/v1/projects/{project}/spans",
            params={"trace_id": [trace_id], "limit": 1000},
            timeout=10,
        )
        reply.raise_for_status()
        data: list[dict[str, Any]] = reply.json()["data"]
        return data

    def traces(self, project: str = "default") -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/v1/projects/{project}/traces", timeout=10)
        reply.raise_for_status()
        data: list[dict[str, Any]] = reply.json()["data"]
        return data

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
