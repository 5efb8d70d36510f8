"""`model.options.cache`: "auto" (the default), "off", or {"ttl", "key"}; anything else is
refused at submit with one line, as a tool mode is. The OpenAI key is one per run, or one
per shared key, in the tenant's namespace, and never the run id, the key or the tenant as
given."""

from __future__ import annotations

from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.policy.caching import (
    AUTO,
    OFF,
    CachePolicy,
    CacheScope,
    cache_policy,
    prompt_cache_key,
)
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.policy.providers import BUILTIN_PROVIDERS

pytestmark = pytest.mark.unit


def ref(options: dict[str, Any]) -> ModelRef:
    return ModelRef.model_validate({"provider": "anthropic", "name": "m", "options": options})


@pytest.mark.parametrize(
    ("options", "policy"),
    [
        ({}, AUTO),
        ({"cache": "auto"}, AUTO),
        ({"cache": "off"}, OFF),
        ({"cache": {"ttl": "1h"}}, CachePolicy(ttl="1h")),
        ({"cache": {"key": "support-agent"}}, CachePolicy(key="support-agent")),
    ],
)
def test_the_settings_accepted(options: dict[str, Any], policy: CachePolicy) -> None:
    assert cache_policy(options) == policy
    EndpointPolicy().resolve(ref(options), BUILTIN_PROVIDERS)


@pytest.mark.parametrize(
    ("cache", "message"),
    [
        ("on", r"^model\.options\.cache: 'on' is not a cache setting \(use \"auto\", \"off\""),
        (True, r"^model\.options\.cache: True is not a cache setting"),
        ({"ttl": "10m"}, r"^model\.options\.cache\.ttl: Input should be '5m' or '1h'$"),
        ({"tll": "5m"}, r"^model\.options\.cache\.tll: Extra inputs are not permitted$"),
        ({"key": ""}, r"^model\.options\.cache\.key: String should have at least 1 character$"),
    ],
)
def test_anything_else_is_refused_at_submit(cache: Any, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        EndpointPolicy().resolve(ref({"cache": cache}), BUILTIN_PROVIDERS)


def scope(run: str, tenant: str = "acme") -> CacheScope:
    return CacheScope(tenant=tenant, run=run)


def test_one_key_per_run_or_per_shared_key() -> None:
    one, other = prompt_cache_key(AUTO, scope("run-1")), prompt_cache_key(AUTO, scope("run-2"))
    assert one == prompt_cache_key(AUTO, scope("run-1"))
    assert one is not None
    assert other not in (None, one)
    assert "run-1" not in one
    assert len(one) <= 64
    shared = CachePolicy(key="support-agent")
    assert prompt_cache_key(shared, scope("run-1")) == prompt_cache_key(shared, scope("run-2"))
    assert prompt_cache_key(shared, scope("run-1")) != one
    assert prompt_cache_key(OFF, scope("run-1")) is None
    assert prompt_cache_key(AUTO, None) is None


def test_the_key_is_in_the_tenants_namespace() -> None:
    shared = CachePolicy(key="support-agent")
    acme, globex = (prompt_cache_key(shared, scope("r", tenant)) for tenant in ("acme", "globex"))
    assert acme is not None
    assert globex is not None
    assert acme != globex
    assert prompt_cache_key(AUTO, scope("r", "acme")) != prompt_cache_key(AUTO, scope("r", "b"))
    assert "acme" not in acme  # the provider never sees the tenant's name
