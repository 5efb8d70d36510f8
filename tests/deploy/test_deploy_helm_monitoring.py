"""The chart's monitoring, rendered by the real Helm CLI (`helm template`): the Grafana
dashboard as a ConfigMap for Grafana's sidecar, and PodMonitors for the pools and, with a
key, the API; both off by default."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.dashboard import DASHBOARD
from tests.support.helm import Release, template

pytestmark = pytest.mark.integration


def _metrics(**metrics: Any) -> Release:
    release = template({"api": {"insecure": True}, "metrics": metrics})
    assert release.error is None, release.error
    return release


def _dashboards(release: Release) -> list[dict[str, Any]]:
    return [o for o in release.of_kind("ConfigMap") if "agentq.json" in o.get("data", {})]


def test_monitoring_is_off_by_default() -> None:
    release = _metrics()
    assert _dashboards(release) == []
    assert release.of_kind("PodMonitor") == []


def test_the_dashboard_is_a_configmap_the_grafana_sidecar_loads() -> None:
    [config_map] = _dashboards(_metrics(grafanaDashboard={"enabled": True}))
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["namespace"] == "agentq"
    assert json.loads(config_map["data"]["agentq.json"]) == json.loads(DASHBOARD.read_text())

    [elsewhere] = _dashboards(
        _metrics(
            grafanaDashboard={
                "enabled": True,
                "labels": {"grafana_dashboard": "agentq"},
                "annotations": {"grafana_folder": "agentq"},
                "namespace": "monitoring",
            }
        )
    )
    assert elsewhere["metadata"]["labels"]["grafana_dashboard"] == "agentq"
    assert elsewhere["metadata"]["annotations"] == {"grafana_folder": "agentq"}
    assert elsewhere["metadata"]["namespace"] == "monitoring"


def test_pod_monitors_scrape_the_pools_and_with_a_key_the_api() -> None:
    [workers] = _metrics(serviceMonitor={"enabled": True}).of_kind("PodMonitor")
    assert workers["spec"]["selector"]["matchLabels"]["agentq.io/role"] == "worker"
    assert workers["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"

    release = _metrics(
        serviceMonitor={
            "enabled": True,
            "labels": {"release": "kube-prometheus-stack"},
            "apiKeySecret": "agentq-metrics-key",
        }
    )
    monitors = {m["metadata"]["name"]: m for m in release.of_kind("PodMonitor")}
    assert set(monitors) == {"rel-agentq", "rel-agentq-api"}
    assert all(
        m["metadata"]["labels"]["release"] == "kube-prometheus-stack" for m in monitors.values()
    )
    api = monitors["rel-agentq-api"]["spec"]
    assert api["selector"]["matchLabels"]["app.kubernetes.io/component"] == "api"
    [endpoint] = api["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert endpoint["authorization"]["credentials"] == {
        "name": "agentq-metrics-key",
        "key": "token",
    }


def test_a_scraped_api_lets_the_metrics_peers_in() -> None:
    monitoring = {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}
    ingress = {"namespaceSelector": {"matchLabels": {"name": "ingress"}}}
    release = template(
        {
            "api": {"insecure": True, "allowFrom": [ingress]},
            "networkPolicy": {"enabled": True, "metricsFrom": [monitoring]},
            "metrics": {"serviceMonitor": {"enabled": True, "apiKeySecret": "agentq-metrics-key"}},
        }
    )
    assert release.error is None, release.error
    [rule] = release.named("NetworkPolicy", "-api")["spec"]["ingress"]
    assert rule["from"] == [ingress, monitoring]
