"""Which prefixes get a cached content, and what it is created with (pure).

The API refuses a cached content under the model's minimum size (1,024 tokens for the
Flash models, 4,096 for Pro: https://ai.google.dev/gemini-api/docs/caching); agentq does
not ask for one it estimates under it (4 characters a token), and records the API's
refusal of one it misjudged. The digest names the prefix within a batch: the endpoint it
is created on (a cached content belongs to one project and one model), the model, the
prefix's exact rendering and its TTL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentq.orchestrator.policy.caching import CacheTTL

# Model name prefixes and their minimum, most specific first.
MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("gemini-2.5-pro", 4096),
    ("gemini-3-pro", 4096),
    ("gemini-2.5-flash", 1024),
    ("gemini-3-flash", 1024),
)
# Any other model: the larger minimum, so a prefix the API would refuse is rarely sent.
DEFAULT_MIN_TOKENS = 4096
CHARS_PER_TOKEN = 4
TTL_S: dict[CacheTTL, int] = {"5m": 300, "1h": 3600}
# A name is used for this fraction of the TTL only: a request that names it then still
# finds it alive, however long its answer takes.
USABLE_FRACTION = 0.8


@dataclass(frozen=True)
class CachePlan:
    digest: str
    body: dict[str, Any]  # what cachedContents.create takes
    ttl_s: int

    @property
    def usable_ms(self) -> int:
        return int(self.ttl_s * USABLE_FRACTION * 1000)


def min_tokens(model: str) -> int:
    for prefix, tokens in MIN_TOKENS:
        if model.startswith(prefix):
            return tokens
    return DEFAULT_MIN_TOKENS


def plan(
    model: str, prefix: dict[str, Any], ttl: CacheTTL, endpoint: Sequence[str | None]
) -> CachePlan | None:
    """The cached content for `prefix` (a request's system instruction, tools and tool
    config), or None when it is empty or too short to be cached."""
    if not prefix:
        return None
    rendered = json.dumps(prefix)
    if len(rendered) // CHARS_PER_TOKEN < min_tokens(model):
        return None
    ttl_s = TTL_S[ttl]
    body = {"model": f"models/{model}", **prefix, "ttl": f"{ttl_s}s"}
    identity = json.dumps([*endpoint, model, ttl_s, rendered])
    return CachePlan(hashlib.sha256(identity.encode()).hexdigest()[:32], body, ttl_s)
