"""docker-compose.yml: valid for Debian's docker-compose, and keeping its promises
(AOF Redis with a volume and a healthcheck, pools with probes, a sandbox engine of its
own and never the host's socket, image names defaulting to `agentq images build`'s).

Bringing the stack up is another test (it needs `agentq serve` and the drain)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentq.cli.images import recipes
from tests.support.dashboard import DASHBOARD
from tests.support.infra import REPO, missing

pytestmark = pytest.mark.integration

COMPOSE_FILE = REPO / "docker-compose.yml"


def compose_config(**env: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    if binary is None:
        missing("docker-compose", "install it with `apt-get install -y docker-compose`")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENTQ_")}
    return subprocess.run(
        [str(binary), "--project-directory", str(REPO), "-f", str(COMPOSE_FILE), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
        check=False,
    )


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    done = compose_config(AGENTQ_API_KEYS="hash tenant")
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = yaml.safe_load(done.stdout)
    return loaded


def test_the_file_is_valid_and_has_every_service(config: dict[str, Any]) -> None:
    assert set(config["services"]) == {
        "redis",
        "api",
        "model",
        "tools",
        "sandbox",
        "engine",
        "engine-images",
        "catalog",
        "phoenix",
        "prometheus",
        "grafana",
    }
    assert config["services"]["phoenix"]["profiles"] == ["trace"]
    assert config["services"]["prometheus"]["profiles"] == ["monitoring"]
    assert config["services"]["grafana"]["profiles"] == ["monitoring"]


def test_images_default_to_what_agentq_images_build_makes(config: dict[str, Any]) -> None:
    names = {key: recipe.name for key, recipe in recipes().items()}
    services = config["services"]
    for service in ("api", "model", "tools", "sandbox", "catalog"):
        assert services[service]["image"] == names["agentq"]
    assert services["redis"]["image"] == names["redis"]
    assert services["engine"]["image"] == names["dind"]
    assert services["phoenix"]["image"] == names["phoenix"]
    assert services["prometheus"]["image"] == names["prometheus"]
    # Grafana comes from Docker Hub, pinned to a version.
    image, _, version = services["grafana"]["image"].partition(":")
    assert image == "grafana/grafana"
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version


def test_redis_keeps_an_append_only_file_on_a_volume(config: dict[str, Any]) -> None:
    redis = config["services"]["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes --appendfsync everysec" in command
    assert redis["volumes"] == ["redis-data:/data:rw"]
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_pools_serve_their_queues_with_probes_and_drain(config: dict[str, Any]) -> None:
    for pool, queue in (("model", "model"), ("tools", "tools"), ("sandbox", "sandbox")):
        service = config["services"][pool]
        command = service["command"]
        assert command[:3] == ["worker", "--queue", queue]
        assert "--health-port" in command
        assert "--drain-timeout" in command
        assert "/readyz" in " ".join(service["healthcheck"]["test"])
        assert service["read_only"] is True
        assert service["cap_drop"] == ["ALL"]
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
    assert "--sandbox" in config["services"]["sandbox"]["command"]


def test_the_sandbox_pool_has_an_engine_of_its_own(config: dict[str, Any]) -> None:
    services = config["services"]
    sandbox = services["sandbox"]
    assert sandbox["environment"]["DOCKER_HOST"] == "tcp://engine:2375"
    assert sandbox["depends_on"]["engine-images"]["condition"] == "service_completed_successfully"
    assert services["engine"]["networks"] == {"engine": None}
    assert config["networks"]["engine"]["internal"] is True
    # No service sees the host's Docker socket.
    for name, service in services.items():
        for volume in service.get("volumes", []):
            assert "docker.sock" not in str(volume), name
    # Provider keys reach the model pool only.
    for name, service in services.items():
        assert ("OPENAI_API_KEY" in service.get("environment", {})) == (name == "model")


def test_the_api_needs_keys() -> None:
    done = compose_config()
    assert done.returncode != 0
    assert "set AGENTQ_API_KEYS" in done.stderr


@pytest.mark.parametrize("service", ["phoenix", "prometheus", "grafana"])
def test_viewers_without_auth_are_published_on_loopback_only(
    config: dict[str, Any], service: str
) -> None:
    """Phoenix and Prometheus have no authentication, Grafana a default admin password:
    their ports are for this host only."""
    ports = config["services"][service]["ports"]
    assert ports
    for port in ports:
        # docker-compose renders a port with an address in the short syntax, one without
        # in the long one.
        host_ip = port.get("host_ip") if isinstance(port, dict) else port.rsplit(":", 2)[0]
        assert host_ip == "127.0.0.1", port


def test_prometheus_scrapes_the_api_and_every_pool(config: dict[str, Any]) -> None:
    """Each service serving metrics is a scrape target at its metrics port; the API's
    job sends the metrics key."""
    scrape = yaml.safe_load((REPO / "deploy/monitoring/prometheus.yml").read_text())
    targets = {
        (name, sd["port"]): job
        for job in scrape["scrape_configs"]
        for sd in job["dns_sd_configs"]
        for name in sd["names"]
    }
    services = config["services"]
    pools = {
        (name, int(command[command.index("--metrics-port") + 1]))
        for name, service in services.items()
        if "--metrics-port" in (command := service.get("command") or [])
    }
    assert pools == {("model", 9090), ("tools", 9090), ("sandbox", 9090)}
    assert set(targets) == pools | {("api", 8000)}
    api = targets[("api", 8000)]
    assert api["authorization"]["credentials_file"] == "/tmp/metrics-key"
    prometheus = services["prometheus"]
    assert "/tmp/metrics-key" in " ".join(prometheus["entrypoint"])
    assert {"/etc/agentq/prometheus.yml", "/prometheus"} <= {
        str(v).split(":")[1] for v in prometheus["volumes"]
    }


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard(
    config: dict[str, Any],
) -> None:
    mounts = {
        target: Path(source)
        for source, target, *_ in (
            str(v).split(":") for v in config["services"]["grafana"]["volumes"]
        )
    }
    provisioning = mounts["/etc/grafana/provisioning"]
    [source] = yaml.safe_load((provisioning / "datasources/agentq.yml").read_text())["datasources"]
    assert (source["type"], source["url"]) == ("prometheus", "http://prometheus:9090")
    [provider] = yaml.safe_load((provisioning / "dashboards/agentq.yml").read_text())["providers"]
    folder = provider["options"]["path"]
    assert (mounts[folder] / "agentq.json").read_text() == DASHBOARD.read_text()
