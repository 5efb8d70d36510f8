"""What workers announce, seen from the deciding side: which announcements are live,
and which model providers they add to the table."""

from __future__ import annotations

from collections.abc import Mapping

from agentq.orchestrator.core.envelopes import MODEL_QUEUE
from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.policy.endpoints import ModelEndpoint
from agentq.orchestrator.policy.providers import ProviderInfo
from agentq.orchestrator.tools.base import ToolAnnouncement

# A tool is live while a process that serves it (a worker, `agentq serve`'s remote tools)
# is: each refreshes its announcements with its heartbeat, every ANNOUNCE_EVERY_S, and
# an announcement not refreshed for ANNOUNCEMENT_TTL_S is gone (its process was killed;
# one that stops withdraws what no other live worker serves at once). The catalogue,
# not a long TTL, is how a deployment accepts tools no live worker serves.
ANNOUNCE_EVERY_S = 10.0
ANNOUNCEMENT_TTL_S = 6 * ANNOUNCE_EVERY_S
# The kind of a registry entry that announces a model provider, not a tool.
MODEL_PROVIDER_KIND = "model-provider"
# The kind of a registry entry naming an endpoint of a models file: a worker that runs
# model steps announces those its models file has, the catalogue those it declares.
MODEL_ENDPOINT_KIND = "model-endpoint"


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


def endpoint_announcements(endpoints: Mapping[str, ModelEndpoint]) -> list[ToolAnnouncement]:
    return [
        ToolAnnouncement(
            name=name,
            kind=MODEL_ENDPOINT_KIND,
            queue=MODEL_QUEUE,
            description=f"model endpoint (provider {endpoint.provider})",
        )
        for name, endpoint in sorted(endpoints.items())
    ]


def check_endpoint_announced(name: str | None, registry: Mapping[str, ToolAnnouncement]) -> None:
    """A models-file endpoint (`name`) a spec resolved to must be one a live worker or the
    catalogue knows: a submitter's models file may have an endpoint the workers' lacks,
    and the run would fail at its first step."""
    if name is None:
        return
    if any(a.kind == MODEL_ENDPOINT_KIND and a.name == name for a in registry.values()):
        return
    raise SpecError(
        f"model.endpoint: no live worker knows the endpoint {name!r} (their models file "
        "lacks it, or no model worker is up): start the model pool with this models file, "
        "or publish it (`agentq catalog publish --models FILE`)"
    )
