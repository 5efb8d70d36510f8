"""The Grafana dashboard's JSON model: a current schema, one Prometheus datasource
variable every panel queries through, panels laid out on Grafana's 24-column grid, and
only metrics the metrics page documents. (Whether each query returns data is
test_deploy_dashboard_queries.py's.)"""

from __future__ import annotations

import re

import pytest

from tests.support.dashboard import dashboard, panels, queries
from tests.support.infra import REPO

pytestmark = pytest.mark.unit

SOURCE = {"type": "prometheus", "uid": "${datasource}"}


def test_the_model_is_current_and_chooses_its_prometheus_by_a_variable() -> None:
    model = dashboard()
    assert model["schemaVersion"] >= 39  # Grafana 10.4 and 11
    assert model["uid"] == "agentq-fleet"
    assert model["title"] == "agentq"
    [variable] = model["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )


def test_every_panel_queries_through_the_variable_on_the_grid() -> None:
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["datasource"] == SOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        assert all(t["datasource"] == SOURCE and t["expr"] for t in panel["targets"])
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]


def test_every_metric_a_panel_reads_is_documented() -> None:
    page = (REPO / "docs/operations/metrics.md").read_text()
    documented = set(re.findall(r"`(agentq_\w+)`", page))
    read = {
        re.sub(r"_bucket$", "", name)
        for _, expr in queries()
        for name in re.findall(r"agentq_\w+", expr)
    }
    assert read - documented == set()
