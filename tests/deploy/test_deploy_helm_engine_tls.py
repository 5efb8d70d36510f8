"""Issue 25 item 5, the chart's part: the sandbox engine (a privileged Docker daemon) serves
its API with mutual TLS on 2376 only, with certificates Helm generates per install, the
client's mounted into the sandbox pool alone, and the release notes say what it can do.

Rendered by the real Helm CLI (`helm template`), the notes by the Helm library's install
(tests/support/helm.py); the rendered certificates then meet in real TLS handshakes on
loopback: the pool's client gets in, a client without a certificate or with another
install's does not.
"""

from __future__ import annotations

import base64
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.helm import Release, load_values, render, template

pytestmark = pytest.mark.integration

ENGINE = "rel-agentq-engine-sandbox"


@pytest.fixture(scope="module")
def release() -> Release:
    rendered = template(load_values("all-on-values.yaml"))
    assert rendered.error is None, rendered.error
    return rendered


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def pem_files(release: Release, secret: str, into: Path) -> dict[str, Path]:
    """The Secret's ca.pem, cert.pem and key.pem, written out as a mount would."""
    data = release.named("Secret", secret)["data"]
    into.mkdir()
    files = {}
    for name in ("ca.pem", "cert.pem", "key.pem"):
        files[name] = into / name
        files[name].write_bytes(base64.b64decode(data[name]))
    return files


def handshake(server: dict[str, Path], client: dict[str, Path] | None, ca: Path) -> str | None:
    """One TLS connection to a server that requires a client certificate, as dockerd
    --tlsverify does; returns the server's refusal, or None when it let the client in."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(server["cert.pem"], server["key.pem"])
    server_ctx.load_verify_locations(server["ca.pem"])
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_ctx = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        client_ctx.load_cert_chain(client["cert.pem"], client["key.pem"])
    refused: list[str] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError) as exc:
                refused.append(str(exc))

        thread = threading.Thread(target=serve)
        thread.start()
        with socket.create_connection(listener.getsockname()) as raw:
            try:
                # The name the pool dials: the server certificate must be valid for it.
                with client_ctx.wrap_socket(raw, server_hostname=ENGINE) as tls:
                    tls.recv(2)
            except (ssl.SSLError, OSError):
                pass  # the server's side says why
        thread.join()
    return refused[0] if refused else None


def test_the_engine_serves_its_api_with_mutual_tls_only(release: Release) -> None:
    engine = release.named("Deployment", "-engine-sandbox")
    dockerd = pod_spec(engine)["containers"][0]
    assert dockerd["args"][:2] == ["dockerd", "--host=tcp://0.0.0.0:2376"]
    assert "--tlsverify" in dockerd["args"]
    assert dockerd["ports"] == [{"name": "docker", "containerPort": 2376}]
    (port,) = release.named("Service", "-engine-sandbox")["spec"]["ports"]
    assert port["port"] == 2376
    # No plain-text API anywhere: not served, not dialled, not let through.
    assert "2375" not in str(release.objects)
    preload = pod_spec(engine)["containers"][1]
    assert {"name": "DOCKER_TLS_VERIFY", "value": "1"} in preload["env"]


def test_the_client_certificate_is_mounted_into_the_sandbox_pool_only(release: Release) -> None:
    pool = pod_spec(release.named("Deployment", "-pool-sandbox"))
    env = pool["containers"][0]["env"]
    assert {"name": "DOCKER_HOST", "value": f"tcp://{ENGINE}:2376"} in env
    assert {"name": "DOCKER_TLS_VERIFY", "value": "1"} in env
    assert {"name": "DOCKER_CERT_PATH", "value": "/etc/agentq/engine-tls"} in env
    assert {"secret": {"secretName": f"{ENGINE}-client-tls", "defaultMode": 0o440}} in [
        {k: v for k, v in volume.items() if k != "name"} for volume in pool["volumes"]
    ]
    for workload in release.of_kind("Deployment") + release.of_kind("StatefulSet"):
        name = workload["metadata"]["name"]
        if name in (f"{ENGINE}", "rel-agentq-pool-sandbox"):
            continue
        shown = str(pod_spec(workload))
        assert "-tls" not in shown, name
        assert "DOCKER_" not in shown, name
    engine = str(pod_spec(release.named("Deployment", "-engine-sandbox")))
    assert f"{ENGINE}-server-tls" in engine


def test_the_pool_gets_in_and_nobody_else_does(release: Release, tmp_path: Path) -> None:
    server = pem_files(release, "-engine-sandbox-server-tls", tmp_path / "server")
    client = pem_files(release, "-engine-sandbox-client-tls", tmp_path / "client")
    assert handshake(server, client, ca=client["ca.pem"]) is None
    assert handshake(server, None, ca=client["ca.pem"]) is not None
    # Another install of the chart generates its own CA: its client is a stranger here.
    other = template(load_values("all-on-values.yaml"))
    assert other.error is None, other.error
    stranger = pem_files(other, "-engine-sandbox-client-tls", tmp_path / "stranger")
    assert stranger["ca.pem"].read_bytes() != client["ca.pem"].read_bytes()
    assert handshake(server, stranger, ca=client["ca.pem"]) is not None


def test_the_notes_say_what_the_engine_can_do() -> None:
    installed = render(load_values("all-on-values.yaml"))
    assert installed.error is None, installed.error
    notes = " ".join(installed.notes.split())
    assert f"Sandbox engine of pool sandbox ({ENGINE}): a privileged Docker daemon" in notes
    assert "act as root on the node" in notes
    assert "mutual TLS on port 2376" in notes
    assert f"Secret {ENGINE}-client-tls (mounted into pool sandbox only)" in notes
