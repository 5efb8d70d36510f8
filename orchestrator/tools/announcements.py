"""What workers announce, seen from the deciding side: which announcements are live,
and which model providers they add to the table."""

from __future__ import annotations

from collections.abc import Mapping

from agentq.orchestrator.policy.providers import ProviderInfo
from agentq.orchestrator.tools.base import ToolAnnouncement

# Announcements older than this are treated as gone: their worker stopped.
ANNOUNCEMENT_TTL_S = 24 * 3600.0
# The kind of a registry entry that announces a model provider, not a tool.
MODEL_PROVIDER_KIND = "model-provider"


def live_registry(
    registry: Mapping[str, ToolAnnouncement], now: float
) -> dict[str, ToolAnnouncement]:
    return {k: a for k, a in registry.items() if now - a.seen_at <= ANNOUNCEMENT_TTL_S}


def announced_providers(registry: Mapping[str, ToolAnnouncement]) -> list[ProviderInfo]:
    return [
        a.model_provider
        for a in registry.values()
        if a.kind == MODEL_PROVIDER_KIND and a.model_provider is not None
    ]
