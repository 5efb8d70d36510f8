"""Tokens (signed claims) and the access log's redaction, pure, with an injected clock."""

from __future__ import annotations

import pytest

from agentq.serve.auth import Principal
from agentq.serve.errors import ApiError
from agentq.serve.server import redact
from agentq.serve.tokens import Signer, narrowed

pytestmark = pytest.mark.unit

KEY_PRINCIPAL = Principal("acme", frozenset({"runs:read", "runs:write", "tools:call", "tool:a*"}))


def test_a_token_verifies_until_it_expires_and_not_when_altered() -> None:
    now = [1000.0]
    signer = Signer(b"secret", clock=lambda: now[0])
    minted = signer.mint(narrowed(KEY_PRINCIPAL, "mcp", None), "mcp", "sha256:k", 60)
    token = minted.token
    grant = signer.verify(token)
    assert grant is not None
    assert grant.principal == Principal("acme", frozenset({"tools:call", "tool:a*"}))
    assert (grant.purpose, grant.holder, minted.expires_at) == ("mcp", "sha256:k", 1060.0)
    assert grant.token_id == minted.token_id
    body, _, mac = token.partition(".")
    assert signer.verify(body[:-2] + "xx." + mac) is None
    assert Signer(b"other").verify(token) is None
    now[0] = 1060.0
    assert signer.verify(token) is None


def test_a_token_is_never_wider_than_its_purpose() -> None:
    assert narrowed(KEY_PRINCIPAL, "events", "r1").scopes == {"run:r1"}
    assert narrowed(KEY_PRINCIPAL, "chat", "chat:c1").scopes == {"chat:c1"}
    reader = Principal("acme", frozenset({"runs:read"}))
    with pytest.raises(ApiError, match="tools:call"):
        narrowed(reader, "mcp", None)
    with pytest.raises(ApiError, match="runs:write"):
        narrowed(reader, "chat", "subject:u1")


def test_query_credentials_are_redacted_from_access_log_paths() -> None:
    assert redact("/mcp?token=aqt_a.b") == "/mcp?token=REDACTED"
    assert redact("/v1/runs?status=x&key=sk-1&after=2") == "/v1/runs?status=x&key=REDACTED&after=2"
    assert redact("/v1/runs/keyed?tokens=1") == "/v1/runs/keyed?tokens=1"
