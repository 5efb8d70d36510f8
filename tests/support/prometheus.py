"""Debian's Prometheus as a real process on a free loopback port, scraping the targets
a test names, and the PromQL a test asks of it over its HTTP API."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support.infra import free_port, missing
from tests.support.waiting import GaveUp, eventually

SCRAPE_INTERVAL_S = 1


def require_prometheus() -> str:
    found = shutil.which("prometheus")
    if found is None:
        missing("prometheus", "apt-get install -y prometheus (.ci/install does)")
    return str(found)


class PrometheusProcess:
    """`jobs` is the scrape config's `scrape_configs` (each job's targets on loopback)."""

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        binary = require_prometheus()
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="agentq-prometheus-"))
        config = self.dir / "prometheus.yml"
        interval = f"{SCRAPE_INTERVAL_S}s"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": interval, "evaluation_interval": interval},
                    "scrape_configs": jobs,
                }
            )
        )
        self.log_path = self.dir / "prometheus.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            eventually(self._ready, "prometheus to be ready", 60, 0.2)
        except GaveUp as gave_up:
            self.stop()
            raise AssertionError(f"{gave_up}\n{self.log()}") from None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited:\n{self.log()}")
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def query(self, expr: str) -> dict[str, Any]:
        """The API's whole answer to an instant query (`status`, `data` or `error`)."""
        answer: dict[str, Any] = httpx.get(
            f"{self.url}/api/v1/query", params={"query": expr}, timeout=30
        ).json()
        return answer

    def targets(self) -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/api/v1/targets", timeout=30).json()
        active: list[dict[str, Any]] = reply["data"]["activeTargets"]
        return active

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
