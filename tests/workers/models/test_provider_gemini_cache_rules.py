"""The Gemini fake's context caching (tests/support/fake_gemini_cache.py), over real HTTP,
as the explicit caching tests rely on it: a cached content is refused under the model's
minimum, named by requests that set none of the fields it holds, billed as cached, gone
after its TTL or its deletion; a repeated prefix is read from the implicit cache."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.fake_cache import Clock
from tests.support.fake_gemini import FakeGemini, Turn
from tests.support.fake_gemini_cache import GeminiCache

pytestmark = pytest.mark.integration

SYSTEM = {"parts": [{"text": "x" * 8000}]}  # 2,000 tokens
GENERATE = "models/gemini-2.5-flash:generateContent"
QUESTION = [{"role": "user", "parts": [{"text": "hello"}]}]


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, Clock]]:
    clock = Clock()
    fake = FakeGemini(lambda _: Turn(text="hi"), cache=GeminiCache(clock=clock))
    with fake as server, httpx.Client(base_url=server.base_url + "/") as http:
        yield http, clock


def create(http: httpx.Client, system: dict[str, Any], model: str = "gemini-2.5-flash") -> Any:
    body = {"model": f"models/{model}", "systemInstruction": system, "ttl": "300s"}
    return http.post("cachedContents", json=body)


def test_a_cached_content_is_named_billed_as_cached_and_expires(
    served: tuple[httpx.Client, Clock],
) -> None:
    http, clock = served
    created = create(http, SYSTEM).json()
    held = created["usageMetadata"]["totalTokenCount"]
    assert created["name"].startswith("cachedContents/")
    assert held >= 2000
    answer = http.post(GENERATE, json={"cachedContent": created["name"], "contents": QUESTION})
    usage = answer.json()["usageMetadata"]
    assert usage["cachedContentTokenCount"] == held
    assert usage["promptTokenCount"] > held
    both = {"cachedContent": created["name"], "contents": QUESTION, "systemInstruction": SYSTEM}
    assert http.post(GENERATE, json=both).status_code == 400
    other = http.post(
        "models/gemini-2.5-pro:generateContent",
        json={"cachedContent": created["name"], "contents": QUESTION},
    )
    assert other.status_code == 400
    clock.advance(301)
    expired = http.post(GENERATE, json={"cachedContent": created["name"], "contents": QUESTION})
    assert expired.status_code == 403


def test_deleted_is_gone(served: tuple[httpx.Client, Clock]) -> None:
    http, _ = served
    name = create(http, SYSTEM).json()["name"]
    assert http.delete(name).status_code == 200
    assert http.delete(name).status_code == 403
    gone = http.post(GENERATE, json={"cachedContent": name, "contents": QUESTION})
    assert gone.status_code == 403


def test_under_the_models_minimum_is_refused(served: tuple[httpx.Client, Clock]) -> None:
    http, _ = served
    short = create(http, {"parts": [{"text": "x" * 3000}]})  # 750 tokens
    assert short.status_code == 400
    assert short.json()["error"]["message"].startswith(
        "Cached content is too small. total_token_count="
    )
    assert create(http, SYSTEM, model="gemini-2.5-pro").status_code == 400  # 4,096 for Pro


def test_a_repeated_prefix_is_read_from_the_implicit_cache(
    served: tuple[httpx.Client, Clock],
) -> None:
    http, clock = served
    body = {"systemInstruction": SYSTEM, "contents": QUESTION}
    first = http.post(GENERATE, json=body).json()["usageMetadata"]
    second = http.post(GENERATE, json=body).json()["usageMetadata"]
    assert first["cachedContentTokenCount"] == 0
    assert second["cachedContentTokenCount"] >= 2000
    clock.advance(301)
    assert http.post(GENERATE, json=body).json()["usageMetadata"]["cachedContentTokenCount"] == 0
