"""Lint and render the Helm chart with the Helm library itself (PyPI `helm-sdkpy`).

Runs under Python >= 3.12 (helm-sdkpy's floor; `.ci/helm-setup` makes the venv), so it
uses the standard library and helm_sdkpy only. There is no Helm binary here and
helm-sdkpy has no `template` action, so rendering is a real `helm install` against a
fake Kubernetes API served in this process: Helm renders, validates values against
values.schema.json, orders and creates every object (hooks included) over HTTP, and the
release's manifest comes back. No cluster, no network beyond loopback.

    python helm_tool.py lint CHART VALUES_JSON     # values merged over values.yaml
    python helm_tool.py render CHART VALUES_JSON   # values as `helm install -f`

Prints one JSON object: lint {"messages": [{"severity", "path"}]}; render {"manifest",
"hooks": [manifest...], "notes", "created": [{"method", "path", "body"}]}.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from helm_sdkpy import Configuration, Install, Lint

_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
_CORE = {
    "secrets": "Secret",
    "configmaps": "ConfigMap",
    "services": "Service",
    "serviceaccounts": "ServiceAccount",
    "pods": "Pod",
    "persistentvolumeclaims": "PersistentVolumeClaim",
}
_GROUPS = {
    "apps/v1": {"deployments": "Deployment", "statefulsets": "StatefulSet"},
    "batch/v1": {"jobs": "Job"},
    "policy/v1": {"poddisruptionbudgets": "PodDisruptionBudget"},
    "networking.k8s.io/v1": {"networkpolicies": "NetworkPolicy", "ingresses": "Ingress"},
    "autoscaling/v2": {"horizontalpodautoscalers": "HorizontalPodAutoscaler"},
    "keda.sh/v1alpha1": {
        "scaledobjects": "ScaledObject",
        "triggerauthentications": "TriggerAuthentication",
    },
    "monitoring.coreos.com/v1": {"podmonitors": "PodMonitor", "servicemonitors": "ServiceMonitor"},
}


def _resource_list(group_version: str, resources: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {
                "name": name,
                "singularName": kind.lower(),
                "namespaced": True,
                "kind": kind,
                "verbs": _VERBS,
            }
            for name, kind in resources.items()
        ],
    }


def _group_list() -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for group_version in _GROUPS:
        group, version = group_version.split("/")
        groups.setdefault(group, []).append(version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": group,
                "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                "preferredVersion": {
                    "groupVersion": f"{group}/{versions[0]}",
                    "version": versions[0],
                },
            }
            for group, versions in groups.items()
        ],
    }


class FakeKube:
    """Just enough of the Kubernetes API for `helm install`: discovery, create, get."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f'clusters: [{{name: fake, cluster: {{server: "{self.url}"}}}}]\n'
            "users: [{name: fake, user: {token: fake}}]\n"
            "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n"
            "current-context: fake\n"
        )
        return path

    def __enter__(self) -> FakeKube:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        kube = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _list(self, path: str, group: str | None, version: str, plural: str) -> None:
                """A collection (what Helm's wait on hook Jobs lists) or a watch on it."""
                group_version = f"{group}/{version}" if group else version
                kind = (_GROUPS.get(group_version) or _CORE).get(plural, "Object")
                items = [o for p, o in kube.objects.items() if p.startswith(path + "/")]
                if "watch=" in self.path:
                    # A watch-list: the objects, then the bookmark that ends the initial list.
                    end = {
                        "kind": kind,
                        "apiVersion": group_version,
                        "metadata": {
                            "resourceVersion": "1",
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        },
                    }
                    stream = [{"type": "ADDED", "object": o} for o in items]
                    stream.append({"type": "BOOKMARK", "object": end})
                    events = "".join(json.dumps(e) + "\n" for e in stream).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(events)))
                    self.end_headers()
                    self.wfile.write(events)
                    return
                self._send(
                    200,
                    {
                        "kind": f"{kind}List",
                        "apiVersion": group_version,
                        "metadata": {"resourceVersion": "1"},
                        "items": items,
                    },
                )

            def _openapi(self, path: str) -> None:
                # Hooks are validated against the OpenAPI schema whatever the options say.
                # An OpenAPI v2 document that knows no type (protobuf: swagger = "2.0"):
                # client-go does not validate types it has no schema for.
                if path != "/openapi/v2":
                    self._not_found()
                    return
                data = b"\x0a\x032.0"
                self.send_response(200)
                self.send_header(
                    "Content-Type", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
                )
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _not_found(self) -> None:
                self._send(
                    404,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "NotFound",
                        "code": 404,
                        "message": "not found",
                    },
                )

            def _body(self) -> dict[str, Any]:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if "json" not in (self.headers.get("Content-Type") or ""):
                    # Helm's release record (protobuf): stored, never read back.
                    return {
                        "kind": "Secret",
                        "apiVersion": "v1",
                        "metadata": {"name": f"helm-release-{len(kube.objects)}"},
                    }
                body: dict[str, Any] = json.loads(raw or b"{}")
                return body

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path.startswith("/openapi/"):
                    self._openapi(path)
                elif path == "/version":
                    self._send(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0"})
                elif path == "/api":
                    self._send(200, {"kind": "APIVersions", "versions": ["v1"]})
                elif path == "/api/v1":
                    self._send(200, _resource_list("v1", _CORE))
                elif path == "/apis":
                    self._send(200, _group_list())
                elif (m := re.fullmatch(r"/apis/([^/]+/[^/]+)", path)) and m[1] in _GROUPS:
                    self._send(200, _resource_list(m[1], _GROUPS[m[1]]))
                elif path in kube.objects:
                    self._send(200, kube.objects[path])
                elif m := re.fullmatch(
                    r"/apis?/(?:(.+)/)?(v[^/]+)/namespaces/[^/]+/([a-z]+)", path
                ):
                    self._list(path, m[1], m[2], m[3])
                else:
                    self._not_found()

            def do_POST(self) -> None:
                body = self._body()
                path = self.path.split("?")[0]
                meta = body.setdefault("metadata", {})
                meta.update(
                    uid=f"uid-{len(kube.objects)}",
                    resourceVersion="1",
                    creationTimestamp="2026-01-01T00:00:00Z",
                )
                if body.get("kind") == "Job":  # hooks wait for their Job: it has succeeded
                    body["status"] = {
                        "succeeded": 1,
                        "conditions": [{"type": "Complete", "status": "True"}],
                    }
                kube.objects[f"{path}/{meta.get('name')}"] = body
                if body.get("kind") != "Secret" or "helm-release" not in meta.get("name", ""):
                    kube.created.append({"method": "POST", "path": path, "body": body})
                self._send(201, body)

            def do_PUT(self) -> None:
                self._send(200, self._body())

            def do_PATCH(self) -> None:
                self._body()
                self._not_found()

            def do_DELETE(self) -> None:
                self._not_found()

        return Handler


def merge(base: Any, overlay: Any) -> Any:
    """Helm's coalescing: maps merge key by key, anything else is replaced."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            merged[key] = merge(base.get(key), value) if key in base else value
        return merged
    return overlay


def lint(chart: Path, values: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`helm lint --strict -f VALUES`: lint a copy whose values.yaml holds the merge."""
    with tempfile.TemporaryDirectory(prefix="agentq-helm-lint-") as tmp:
        copy = Path(tmp) / chart.name
        shutil.copytree(chart, copy)
        # JSON is YAML: the merged values replace the chart's defaults in the copy.
        (copy / "values.yaml").write_text(json.dumps(merge(defaults, values)))
        result = asyncio.run(Lint(Configuration(namespace="agentq")).run(str(copy)))
    messages = [
        {"severity": m.get("Severity"), "path": m.get("Path")}
        for m in (result.get("Messages") or [])
    ]
    return {"messages": messages}


def render(chart: Path, values: dict[str, Any]) -> dict[str, Any]:
    with FakeKube() as kube, tempfile.TemporaryDirectory(prefix="agentq-helm-") as tmp:
        config = Configuration(
            namespace="agentq", kubeconfig=str(kube.kubeconfig(Path(tmp) / "kc"))
        )
        release = asyncio.run(
            Install(config).run("rel", str(chart), values=values, wait=False, timeout=30)
        )
        return {
            "manifest": release.get("manifest", ""),
            "hooks": [h.get("manifest", "") for h in release.get("hooks") or []],
            "notes": (release.get("info") or {}).get("notes", ""),
            "created": kube.created,
        }


def main(argv: list[str]) -> int:
    action, chart_arg, values_json = argv
    chart = Path(chart_arg)
    values = json.loads(values_json)
    try:
        if action == "lint":
            defaults = json.loads(sys.stdin.read() or "{}")
            out = lint(chart, values, defaults)
        else:
            out = render(chart, values)
    except Exception as exc:  # the caller shows Helm's own message
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
