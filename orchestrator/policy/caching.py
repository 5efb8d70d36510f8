"""Prompt caching: `model.options.cache` (in a spec or a models-file endpoint).

- `"auto"` (the default): cache what the provider lets a request cache. Anthropic gets
  rolling `cache_control` breakpoints (workers/models/anthropic_cache.py); OpenAI Chat
  Completions and Responses get a `prompt_cache_key`, one per run, in the run's tenant's
  namespace; Gemini caches a stable prefix implicitly, and a batch's lines share one
  explicit cached content of their system instruction and tools
  (workers/models/gemini_cache/).
- `"off"`: no breakpoints and no key.
- `{"ttl": "5m" | "1h", "key": "..."}`: on, with Anthropic's cache lifetime (a write to the
  1-hour cache costs more: worth it only when steps are minutes apart) and a Gemini
  cached content's, and the key
  shared by every run that names it (an agent template in a batch, whose runs share a
  long prefix) instead of one per run.

Checked at submit on the options a step will use, as the tool mode is, so a typo fails
there rather than silently leaving a long loop uncached.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentq.orchestrator.core.errors import SpecError

CacheTTL = Literal["5m", "1h"]


class CachePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    ttl: CacheTTL = "5m"
    key: str | None = Field(default=None, min_length=1, max_length=256)


AUTO = CachePolicy()
OFF = CachePolicy(enabled=False)
_NAMED = {"auto": AUTO, "off": OFF}


def cache_policy(options: Mapping[str, Any]) -> CachePolicy:
    """What the options ask for, or a SpecError naming the accepted forms."""
    value = options.get("cache", "auto")
    if isinstance(value, str) and value in _NAMED:
        return _NAMED[value]
    if isinstance(value, dict):
        try:
            return CachePolicy.model_validate(value)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise SpecError(f"model.options.cache.{where}: {error['msg']}") from None
    raise SpecError(
        f"model.options.cache: {value!r} is not a cache setting "
        '(use "auto", "off" or {"ttl": "5m" | "1h", "key": "..."})'
    )


class CacheScope(BaseModel):
    """Who shares a request's prefix: a run's steps, in its tenant's namespace, and the
    lines of its batch (a template's system prompt and tools) when it is a batch's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str
    run: str
    batch: str | None = None


def prompt_cache_key(policy: CachePolicy, scope: CacheScope | None) -> str | None:
    """The key that keeps requests sharing a prefix on the provider's cache of it: the
    policy's shared key, else the run's, within the tenant's namespace. Two tenants naming
    the same key (one agent template) must not share a cache: which prompts a cache holds
    is visible in its timing. Hashed, so neither the tenant nor the key leaves the
    deployment as is, and every key is within the providers' length limit."""
    if not policy.enabled or scope is None:
        return None
    shared = ["key", policy.key] if policy.key is not None else ["run", scope.run]
    # A JSON array: no tenant and key can be chosen to spell another pair's source.
    source = json.dumps([scope.tenant, *shared])
    return "aq-" + hashlib.sha256(source.encode()).hexdigest()[:32]
