"""The remote kind: a spec names a tool the deployment declared, never a queue; the
remote-tools file is checked with errors naming the field; signatures verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core.errors import SpecError, UnknownToolError
from agentq.orchestrator.policy.signing import signed_headers, verify
from agentq.orchestrator.spec.resolution import resolve_tools
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import registry_key
from agentq.orchestrator.tools.remote import load_remote_tools
from tests.support.remote_tools import SHOUT, remote_tools_file

pytestmark = pytest.mark.unit


def _spec(entry: dict[str, object]) -> RunSpec:
    return RunSpec.model_validate({"model": "openai:m", "prompt": "p", "tools": [entry]})


def test_a_declared_remote_tool_resolves_to_its_queue() -> None:
    (decl,) = load_remote_tools(remote_tools_file()).tools
    ann = decl.announcement()
    (tool,) = resolve_tools(_spec({"type": "remote", "name": "shout"}), {registry_key(ann): ann}, 0)
    assert (tool.kind, tool.queue, tool.input_schema) == (
        "remote",
        "node-tools",
        SHOUT["input_schema"],
    )


def test_an_undeclared_remote_tool_is_refused() -> None:
    with pytest.raises(UnknownToolError, match="no remote tool 'shout'"):
        resolve_tools(_spec({"type": "remote", "name": "shout"}), {}, 0)


def test_a_spec_cannot_pick_a_queue() -> None:
    with pytest.raises(ValidationError, match="queue"):
        _spec({"type": "remote", "name": "shout", "queue": "tools"})


def test_a_bad_remote_tools_file_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "remote.json"
    bad.write_text(json.dumps({"tools": [{**SHOUT, "queue": "no spaces"}]}))
    with pytest.raises(SpecError, match=r"tools\.0\.queue"):
        load_remote_tools(str(bad))
    orphan = tmp_path / "orphan.json"
    orphan.write_text(json.dumps({"webhooks": {"q": {"url": "http://x", "secret_env": "S"}}}))
    with pytest.raises(SpecError, match="webhook for unknown queue 'q'"):
        load_remote_tools(str(orphan))


@pytest.mark.parametrize(
    ("secret", "body", "skew_s", "ok"),
    [
        ("k", b'{"a":1}', 0, True),
        ("other", b'{"a":1}', 0, False),
        ("k", b'{"a":2}', 0, False),
        ("k", b'{"a":1}', 301, False),
    ],
)
def test_signatures_verify_only_the_same_secret_body_and_a_fresh_timestamp(
    secret: str, body: bytes, skew_s: float, ok: bool
) -> None:
    headers = signed_headers("k", b'{"a":1}', now_s=1_000_000)
    assert (
        verify(
            secret,
            headers["X-Agentq-Timestamp"],
            body,
            headers["X-Agentq-Signature"],
            now_s=1_000_000 + skew_s,
        )
        is ok
    )


@pytest.mark.parametrize(
    ("timestamp", "signed"),
    [
        ("+{t}", "{sig}"),
        (" {t}", "{sig}"),
        ("{t} ", "{sig}"),
        ("{t}\n", "{sig}"),
        ("٣{t}", "{sig}"),  # an Arabic-Indic digit: int() takes it
        ("{t}", "v1=é{sig}"),  # a non-ASCII signature: compare_digest raised TypeError
        ("{t}", "\udcff"),
    ],
)
def test_a_mangled_timestamp_or_signature_is_refused_without_raising(
    timestamp: str, signed: str
) -> None:
    headers = signed_headers("k", b"{}", now_s=1_000_000)
    t, sig = headers["X-Agentq-Timestamp"], headers["X-Agentq-Signature"]
    mangled_t = timestamp.format(t=t)
    mangled_sig = signed.format(sig=sig)
    assert verify("k", mangled_t, b"{}", mangled_sig, now_s=1_000_000) is False


async def test_the_catalogue_holds_the_deployments_remote_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentq.workers.worker.catalog import build_catalog

    monkeypatch.setenv("AGENTQ_REMOTE_TOOLS", remote_tools_file())
    entries, _ = await build_catalog()
    (shout,) = [e for e in entries if e.kind == "remote"]
    assert (shout.name, shout.queue) == ("shout", "node-tools")
