"""Which Gemini prefixes get an explicit cached content, and what a request naming one
sends (pure): the prefix is the request's system instruction, tools and tool config as
sent without one; under the model's minimum, or empty, there is none."""

from __future__ import annotations

import pytest

from agentq.orchestrator.core.messages import UserMessage
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models.base import ModelRequest, OfferedTool
from agentq.workers.models.gemini import GeminiWire
from agentq.workers.models.gemini_cache.prefix import min_tokens, plan

pytestmark = pytest.mark.unit

ENDPOINT = ["https://generativelanguage.googleapis.com/v1beta", "GEMINI_API_KEY"]
TOOLS = [OfferedTool(name="lookup", input_schema={"type": "object", "properties": {}})]


def request(system: str, cached: str | None = None) -> ModelRequest:
    return ModelRequest(
        model=ModelRef(provider="gemini", name="gemini-2.5-flash"),
        system=system,
        messages=[UserMessage(content="hello")],
        tools=TOOLS,
        cached_content=cached,
    )


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("gemini-2.5-flash", 1024),
        ("gemini-2.5-flash-lite", 1024),
        ("gemini-2.5-pro", 4096),
        ("gemini-2.0-flash", 4096),
    ],
)
def test_the_minimum_by_model(model: str, tokens: int) -> None:
    assert min_tokens(model) == tokens


def test_a_request_naming_a_cached_content_sends_its_contents_only() -> None:
    wire = GeminiWire()
    long = "You are careful. " * 400
    plain = wire.body(request(long), stream=False)
    prefix = wire.cached_prefix(request(long))
    assert prefix == {k: plain[k] for k in ("systemInstruction", "tools", "toolConfig")}
    named = wire.body(request(long, cached="cachedContents/c1"), stream=False)
    assert named == {"contents": plain["contents"], "cachedContent": "cachedContents/c1"}
    made = plan("gemini-2.5-flash", prefix, "5m", ENDPOINT)
    assert made is not None
    assert made.body == {"model": "models/gemini-2.5-flash", **prefix, "ttl": "300s"}
    assert made.usable_ms < made.ttl_s * 1000  # never named past its expiry
    # The digest names this prefix on this endpoint with this TTL only.
    assert plan("gemini-2.5-flash", prefix, "5m", ENDPOINT) == made
    other_key = plan("gemini-2.5-flash", prefix, "5m", [ENDPOINT[0], "OTHER_KEY"])
    assert other_key is not None
    assert other_key.digest != made.digest
    one_hour = plan("gemini-2.5-flash", prefix, "1h", ENDPOINT)
    assert one_hour is not None
    assert one_hour.digest != made.digest


def test_a_short_or_empty_prefix_gets_none() -> None:
    short = GeminiWire().cached_prefix(request("You are careful."))
    assert plan("gemini-2.5-flash", short, "5m", ENDPOINT) is None
    assert plan("gemini-2.5-flash", {}, "5m", ENDPOINT) is None
    long = GeminiWire().cached_prefix(request("You are careful. " * 400))  # ~1,700 tokens
    assert plan("gemini-2.5-pro", long, "5m", ENDPOINT) is None
