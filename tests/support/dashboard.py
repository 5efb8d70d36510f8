"""The Grafana dashboard shipped in the chart (helm/agentq/dashboards/agentq.json), and
its panels' PromQL as Prometheus would receive it from Grafana."""

from __future__ import annotations

import json
from typing import Any

from tests.support.infra import REPO

DASHBOARD = REPO / "helm/agentq/dashboards/agentq.json"
# What Grafana puts in place of its built-in variables before it sends a query.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "1h"}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def queries() -> list[tuple[str, str]]:
    """(panel title and target, the target's expression with Grafana's variables filled)."""
    found = []
    for panel in panels():
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            found.append((f"{panel['title']} [{target['refId']}]", expr))
    return found
