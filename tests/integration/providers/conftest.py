from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

# The fakes listen on loopback; these tests choose their URLs in the spec, which a
# deployment must allow, and send the providers' usual key variables there.
SPEC_ENDPOINTS = "http://127.0.0.1:"
SPEC_KEY_ENVS = "OPENAI_API_KEY,ANTHROPIC_API_KEY,GEMINI_API_KEY,MY_KEY"


@pytest.fixture(autouse=True)
def allow_loopback_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTQ_ALLOW_SPEC_ENDPOINTS", SPEC_ENDPOINTS)
    monkeypatch.setenv("AGENTQ_ALLOW_SPEC_KEY_ENVS", SPEC_KEY_ENVS)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP client a provider under test talks to its local fake with."""
    async with httpx.AsyncClient() as client:
        yield client
