"""The Helm chart: lints clean (strict) and renders, for the defaults and every ci/ values
file, into manifests that keep the promises the chart makes (security context, labels,
drain-aware grace periods, config checksums, autoscaling, Redis, the catalogue hook)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentq.cli.main import catalog_publish
from tests.support.helm import VALUES_FILES, Release, lint, load_values, render

pytestmark = pytest.mark.integration

WORKLOADS = ("Deployment", "StatefulSet", "Job")
STANDARD_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
    "helm.sh/chart",
)

_renders: dict[str, Release] = {}


def rendered(values_file: str) -> Release:
    if values_file not in _renders:
        _renders[values_file] = render(load_values(values_file))
    release = _renders[values_file]
    assert release.error is None, release.error
    return release


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_chart_lints_clean_in_strict_mode(values_file: str) -> None:
    messages = lint(load_values(values_file))
    # --strict: a warning (severity 2) fails like an error (3); info (1) does not.
    assert [m for m in messages if m["severity"] >= 2] == []


def test_the_linter_sees_a_value_the_schema_refuses() -> None:
    messages = lint({"pools": {"model": {"concurrency": "many"}}})
    assert any(m["severity"] == 3 and m["path"] == "values.yaml" for m in messages)


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_every_object_carries_the_standard_labels(values_file: str) -> None:
    release = rendered(values_file)
    assert release.objects
    for obj in release.objects:
        labels = obj["metadata"].get("labels", {})
        missing = [label for label in STANDARD_LABELS if label not in labels]
        assert missing == [], f"{obj['kind']} {obj['metadata']['name']} lacks {missing}"


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_every_pod_is_non_root_read_only_and_drops_all_capabilities(values_file: str) -> None:
    for workload in (o for o in rendered(values_file).objects if o["kind"] in WORKLOADS):
        pod = pod_spec(workload)
        name = workload["metadata"]["name"]
        assert pod["automountServiceAccountToken"] is False, name
        if workload["spec"]["template"]["metadata"]["labels"].get("agentq.io/privileged"):
            # The sandbox pool's Docker engine: only its dockerd is privileged.
            privileged = [
                c["name"] for c in pod["containers"] if c["securityContext"].get("privileged")
            ]
            assert privileged == ["dockerd"], name
            continue
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for container in pod["containers"] + pod.get("initContainers", []):
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, (name, container["name"])
            assert context["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert context["capabilities"]["drop"] == ["ALL"], (name, container["name"])


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_one_deployment_per_pool_serving_its_queues(values_file: str) -> None:
    values = load_values(values_file)
    release = rendered(values_file)
    pools = values.get("pools") or {"model": {"queues": ["model"]}, "tools": {"queues": ["tools"]}}
    drain = {"timeoutSeconds": 30, "graceExtraSeconds": 15, **values.get("drain", {})}
    for name, pool in pools.items():
        deployment = release.named("Deployment", f"-pool-{name}")
        pod = pod_spec(deployment)
        args = pod["containers"][0]["args"]
        assert args[0] == "worker"
        for queue in pool.get("queues") or []:
            assert f"--queue={queue}" in args
        assert f"--drain-timeout={drain['timeoutSeconds']}" in args
        # Kubernetes must not kill a worker that is still draining.
        grace = drain["timeoutSeconds"] + drain["graceExtraSeconds"]
        assert pod["terminationGracePeriodSeconds"] == grace
        probes = pod["containers"][0]
        assert probes["livenessProbe"]["httpGet"]["path"] == "/livez"
        assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert len(annotations["checksum/config"]) == 64


def test_a_config_change_rolls_the_pods() -> None:
    def checksum(mcp: dict[str, Any]) -> str:
        release = render({"mcpConfig": mcp})
        assert release.error is None, release.error
        deployment = release.named("Deployment", "-pool-tools")
        value: str = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    one = checksum({"mcpServers": {"time": {"command": "mcp-server-time"}}})
    other = checksum({"mcpServers": {"time": {"command": "mcp-server-time", "args": ["-v"]}}})
    assert one != other


def test_keda_scales_each_pool_on_its_queue_depth_from_zero() -> None:
    release = rendered("all-on-values.yaml")
    scaled = {o["spec"]["scaleTargetRef"]["name"]: o for o in release.of_kind("ScaledObject")}
    assert set(scaled) == {
        d["metadata"]["name"]
        for d in release.of_kind("Deployment")
        if "-pool-" in d["metadata"]["name"]
    }
    model = scaled["rel-agentq-pool-model"]
    assert model["spec"]["minReplicaCount"] == 0
    [trigger] = model["spec"]["triggers"]
    assert trigger["type"] == "metrics-api"
    assert trigger["metadata"]["valueLocation"] == "queues.model.depth"
    # ?queue= makes the API list the queue even while it is empty (KEDA needs the path).
    assert trigger["metadata"]["url"].endswith("/v1/queues?queue=model")
    assert trigger["authenticationRef"]["name"] == "rel-agentq-keda"
    # While the API cannot answer, KEDA keeps a replica rather than freezing or dropping.
    assert model["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 1}
    # The autoscaler owns the replica count.
    for deployment in release.of_kind("Deployment"):
        if "-pool-" in deployment["metadata"]["name"]:
            assert "replicas" not in deployment["spec"]
    assert release.of_kind("HorizontalPodAutoscaler") == []


def test_keda_can_read_prometheus_instead() -> None:
    release = rendered("external-redis-values.yaml")
    tools = next(
        o for o in release.of_kind("ScaledObject") if o["metadata"]["name"].endswith("-pool-tools")
    )
    queries = [t["metadata"]["query"] for t in tools["spec"]["triggers"]]
    assert queries == [
        'max(agentq_queue_depth{queue="tools"})',
        'max(agentq_queue_depth{queue="tools-slow"})',
    ]
    # agentq_queue_depth is ready + running: it reads 0 once the pool is idle.
    assert [t["metadata"]["activationThreshold"] for t in tools["spec"]["triggers"]] == ["0", "0"]
    assert tools["spec"]["fallback"]["failureThreshold"] == 3


def test_without_keda_a_pool_autoscales_on_cpu() -> None:
    release = rendered("hpa-values.yaml")
    [hpa] = release.of_kind("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "rel-agentq-pool-model"
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert release.named("Deployment", "-pool-tools")["spec"]["replicas"] == 3


def test_bundled_redis_keeps_an_append_only_file_on_a_volume() -> None:
    release = rendered("all-on-values.yaml")
    redis = release.named("StatefulSet", "-redis")
    command = " ".join(pod_spec(redis)["containers"][0]["args"])
    assert "--appendonly yes --appendfsync everysec" in command
    assert "--requirepass" in command
    [claim] = redis["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    env = pod_spec(release.named("Deployment", "-pool-model"))["containers"][0]["env"]
    url = next(e for e in env if e["name"] == "AGENTQ_REDIS_URL")
    assert url["value"] == "redis://:$(REDIS_PASSWORD)@rel-agentq-redis:6379/0"


def test_external_redis_comes_from_an_existing_secret() -> None:
    release = rendered("external-redis-values.yaml")
    assert release.of_kind("StatefulSet") == []
    for deployment in release.of_kind("Deployment"):
        env = pod_spec(deployment)["containers"][0]["env"]
        url = next(e for e in env if e["name"] == "AGENTQ_REDIS_URL")
        assert url["valueFrom"]["secretKeyRef"] == {"name": "agentq-redis-url", "key": "url"}


def test_the_catalogue_is_published_after_install_and_upgrade(tmp_path: Path) -> None:
    release = rendered("all-on-values.yaml")
    [job] = release.of_kind("Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    args = pod_spec(job)["containers"][0]["args"]
    assert args == [
        "catalog",
        "publish",
        "--tools=myapp.tools",
        "--mcp-config=/etc/agentq/mcp.json",
        "--sandbox",
        "--queue=tools",
    ]
    # Options the command takes: the hook Job would fail at every install otherwise.
    mounted = tmp_path / "mcp.json"  # the ConfigMap's file, as the pod sees it
    mounted.write_text("{}")
    given = [a.replace("/etc/agentq/mcp.json", str(mounted)) for a in args[2:]]
    context = catalog_publish.make_context("publish", given)
    assert context.params["tool_modules"] == ("myapp.tools",)
    assert context.params["tool_queue"] == "tools"
    # publish lists the MCP servers' tools: it reaches what the MCP pool reaches.
    egress = release.named("NetworkPolicy", "-catalog")["spec"]["egress"]
    assert {
        "to": [{"ipBlock": {"cidr": "10.30.0.0/16"}}],
        "ports": [{"port": 8443, "protocol": "TCP"}],
    } in egress


def test_the_sandbox_engine_is_reachable_from_its_pool_only() -> None:
    release = rendered("all-on-values.yaml")
    policy = release.named("NetworkPolicy", "-engine-sandbox")
    [rule] = policy["spec"]["ingress"]
    assert rule["from"] == [
        {
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "agentq",
                    "app.kubernetes.io/instance": "rel",
                    "app.kubernetes.io/component": "pool-sandbox",
                }
            }
        }
    ]
    env = pod_spec(release.named("Deployment", "-pool-sandbox"))["containers"][0]["env"]
    assert {"name": "DOCKER_HOST", "value": "tcp://rel-agentq-engine-sandbox:2376"} in env
    # The tools pool has no route to the engine, nor to the internet.
    tools = release.named("NetworkPolicy", "-pool-tools")
    assert "2376" not in str(tools["spec"]["egress"])
    assert "0.0.0.0/0" not in str(tools["spec"]["egress"])


def test_provider_keys_reach_the_model_pool_only() -> None:
    release = rendered("all-on-values.yaml")
    model = pod_spec(release.named("Deployment", "-pool-model"))["containers"][0]
    assert model["envFrom"] == [{"secretRef": {"name": "agentq-provider-keys"}}]
    sandbox = pod_spec(release.named("Deployment", "-pool-sandbox"))["containers"][0]
    assert "envFrom" not in sandbox


def test_an_api_without_keys_is_refused_unless_marked_insecure() -> None:
    release = render({"api": {"auth": {"existingSecret": ""}}})
    assert release.error is not None
    assert "api.auth.existingSecret" in release.error
