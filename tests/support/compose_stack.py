"""docker-compose.yml brought up for real, for the compose test.

Images come from `agentq images build` (no registry): each carries the fingerprint of
what it was built from, so a run reuses the images of an earlier one (CI runs on this
machine's Docker daemon) and rebuilds only what changed, the agentq image when the
checkout changed. The sandbox images the pool's own engine loads are saved to a cache
directory once per image id.

The stack runs under one fixed project name: a run that crashed before `down` leaves
nothing the next run does not remove first, and `down` runs whatever happens.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agentq.cli.images import build_images, recipes
from agentq.sandbox.images import build_images as build_sandbox_images
from agentq.sandbox.images import run_step
from tests.support.infra import REPO, free_ports, missing
from tests.support.waiting import eventually

PROJECT = "agentqci"
COMPOSE_FILES = (REPO / "docker-compose.yml", REPO / "tests/support/compose/ci.yml")
CI_TOOLS = REPO / "tests/support/compose/ci_tools.py"
# Survives between CI runs on the same machine (the saved sandbox images).
CACHE = Path(os.environ.get("AGENTQ_CI_CACHE", "/var/tmp/agentq-ci"))
API_KEY = "aq-compose-test-key"
METRICS_KEY = "aq-compose-test-metrics-key"
SERVICES = ("redis", "engine", "engine-images", "api", "model", "tools", "sandbox", "catalog")
PROFILES = ("trace", "monitoring")
# In the monitoring profile, but from Docker Hub, which this machine cannot reach.
NOT_PULLABLE = ("grafana",)


def require_docker_compose() -> str:
    for tool, how in (
        ("docker", "apt-get install -y docker.io and start dockerd (.ci/sandbox-setup does)"),
        ("docker-compose", "apt-get install -y docker-compose (.ci/install does)"),
        ("debootstrap", "apt-get install -y debootstrap (.ci/sandbox-setup does)"),
    ):
        if shutil.which(tool) is None:
            missing(tool, how)
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if info.returncode != 0:
        missing("the Docker daemon", "start dockerd (.ci/sandbox-setup does)")
    return str(shutil.which("docker-compose"))


@dataclass
class Images:
    """What the stack runs: image names, the saved sandbox images, and build times."""

    agentq: str
    sandbox_dir: Path
    seconds: dict[str, float] = field(default_factory=dict)


def prepare_images() -> Images:
    seconds: dict[str, float] = {}
    for built in build_images(["redis", "dind", "phoenix", "prometheus", "agentq"]):
        seconds[built.name] = built.seconds
    started = time.monotonic()
    names = build_sandbox_images()
    seconds["sandbox images"] = time.monotonic() - started
    started = time.monotonic()
    sandbox_dir = CACHE / "sandbox-images"
    save_once(names, sandbox_dir / "sandbox-images.tar")
    seconds["sandbox images saved"] = time.monotonic() - started
    return Images(recipes()["agentq"].name, sandbox_dir, seconds)


def save_once(names: Sequence[str], target: Path) -> None:
    """`docker save` the images unless the tar beside its stamp holds these very ids."""
    ids = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", *names],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    stamp = target.with_suffix(".ids")
    wanted = " ".join([*names, *ids])
    if target.is_file() and stamp.is_file() and stamp.read_text() == wanted:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    run_step(["docker", "save", "--output", str(partial), *names], step="docker save")
    partial.replace(target)
    stamp.write_text(wanted)


class Stack:
    """The compose project: up, HTTP to the API, Phoenix and Prometheus, kill/start, down."""

    def __init__(self, binary: str, images: Images, workdir: Path, script: list[Any]) -> None:
        self.binary = binary
        self.workdir = workdir
        self.api_port, self.phoenix_port, self.prometheus_port = free_ports(3)
        state = workdir / "state"
        state.mkdir(parents=True)
        tools = workdir / "tools"
        tools.mkdir()
        shutil.copy(CI_TOOLS, tools / "ci_tools.py")
        (workdir / "script.json").write_text(json.dumps(script))
        # The containers run as uid 10001: they write the test's state directory.
        for path in (workdir, state):
            path.chmod(0o777)
        from agentq.serve.auth import hash_key

        clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTQ_", "OTEL_"))}
        self.env = {
            **clean,
            "COMPOSE_PROJECT_NAME": PROJECT,
            "AGENTQ_IMAGE": images.agentq,
            "AGENTQ_API_KEYS": f"{hash_key(API_KEY)} ci; {hash_key(METRICS_KEY)} ops metrics",
            "AGENTQ_METRICS_KEY": METRICS_KEY,
            "AGENTQ_API_PORT": str(self.api_port),
            "AGENTQ_PHOENIX_PORT": str(self.phoenix_port),
            "AGENTQ_PROMETHEUS_PORT": str(self.prometheus_port),
            "AGENTQ_OTLP_ENDPOINT": "http://phoenix:6006",
            "AGENTQ_IMAGES_DIR": str(images.sandbox_dir),
            "AGENTQ_TOOLS_DIR": str(tools),
            "AGENTQ_TOOLS": "/tools/ci_tools.py",
            "AGENTQ_CI_DIR": str(workdir),
            "AGENTQ_CI_REPO": str(REPO),
            "OPENAI_API_KEY": "sk-compose-test",
        }

    def compose(self, *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
        files = [arg for path in COMPOSE_FILES for arg in ("-f", str(path))]
        profiles = [arg for profile in PROFILES for arg in ("--profile", profile)]
        return subprocess.run(
            [self.binary, "--project-directory", str(REPO), *files, *profiles, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout_s,
            check=False,
        )

    def up(self) -> None:
        """Every service of the file and the profiles but those no registry here serves."""
        listed = self.compose("config", "--services")
        assert listed.returncode == 0, listed.stderr
        services = [s for s in listed.stdout.split() if s not in NOT_PULLABLE]
        done = self.compose("up", "-d", *services)
        assert done.returncode == 0, done.stderr[-4000:] + self.logs()

    def down(self) -> None:
        done = self.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")
        assert done.returncode == 0, done.stderr[-4000:]

    def logs(self, *services: str) -> str:
        """The last lines of each service's log (Phoenix's banner left out unless asked)."""
        names = services or SERVICES
        return "".join(
            f"\n--- {name}\n" + self.compose("logs", "--no-color", "--tail", "40", name).stdout
            for name in names
        )

    def container(self, service: str) -> str:
        done = self.compose("ps", "-q", service)
        ids = done.stdout.split()
        assert len(ids) == 1, (service, done.stdout, done.stderr)
        return ids[0]

    def state(self, service: str) -> dict[str, Any]:
        done = subprocess.run(
            ["docker", "inspect", "--format", "{{json .State}}", self.container(service)],
            capture_output=True,
            text=True,
            check=True,
        )
        loaded: dict[str, Any] = json.loads(done.stdout)
        return loaded

    def health(self, *services: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for service in services:
            state = self.state(service)
            found[service] = str(state.get("Health", {}).get("Status") or state.get("Status"))
        return found

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def phoenix(self) -> str:
        return f"http://127.0.0.1:{self.phoenix_port}"

    @property
    def prometheus(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    def http(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.api, headers={"authorization": f"Bearer {API_KEY}"}, timeout=30
        )

    def wait_healthy(self, services: Sequence[str], timeout_s: float = 300) -> None:
        try:
            eventually(
                lambda: self.health(*services),
                "the stack to be healthy",
                timeout_s,
                1,
                until=lambda found: set(found.values()) == {"healthy"},
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}{self.logs()}") from None


def leftovers() -> dict[str, list[str]]:
    """Containers, networks and volumes of the test's compose project still present."""
    label = f"label=com.docker.compose.project={PROJECT}"
    found: dict[str, list[str]] = {}
    for kind, args in (
        ("containers", ["ps", "-a", "-q"]),
        ("networks", ["network", "ls", "-q"]),
        ("volumes", ["volume", "ls", "-q"]),
    ):
        done = subprocess.run(
            ["docker", *args, "--filter", label], capture_output=True, text=True, check=True
        )
        found[kind] = done.stdout.split()
    return found
