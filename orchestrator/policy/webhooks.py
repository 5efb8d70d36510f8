"""A run's webhooks: the spec's part, and the checks a submitter makes.

`"webhooks": [{"url", "events": ["finish-step", "finish"], "secret_env"}]`. Workers
deliver each selected event of the run (at least once, in order, with retries and
backoff, signed by `orchestrator.signing` with the secret read from the named variable
of the worker's environment); a delivery that fails for good adds a `webhook-failed`
event and never fails the run. The URL's host must be allowed by the deployment
(`AGENTQ_ALLOW_WEBHOOK_HOSTS`, with the same SSRF guard as HTTP tools), and the secret's
variable must be one it lets specs name (`AGENTQ_ALLOW_HTTP_ENVS`).
"""

from __future__ import annotations

from typing import get_args

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.events import EventType
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.policy.egress import HostAllowList, check_spec_host

# Reports about deliveries are never delivered themselves (a failing receiver would
# feed itself).
UNDELIVERABLE = frozenset({"webhook-failed"})
DELIVERABLE = frozenset(get_args(EventType)) - UNDELIVERABLE
MAX_WEBHOOKS = 8


class WebhookSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2048)
    events: list[str] = Field(min_length=1)
    secret_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    def selects(self, event_type: str) -> bool:
        return event_type in self.events and event_type not in UNDELIVERABLE


def webhook_hosts(settings: Settings) -> HostAllowList:
    return HostAllowList.parse(settings.allow_webhook_hosts, "AGENTQ_ALLOW_WEBHOOK_HOSTS")


def secret_envs(settings: Settings) -> frozenset[str]:
    return frozenset(v.strip() for v in settings.allow_http_envs.split(",") if v.strip())


def check_webhooks(webhooks: list[WebhookSpec], settings: Settings) -> None:
    """A SpecError naming the first webhook the deployment does not allow."""
    if len(webhooks) > MAX_WEBHOOKS:
        raise SpecError(f"webhooks: at most {MAX_WEBHOOKS}")
    allow = webhook_hosts(settings)
    for i, hook in enumerate(webhooks):
        where = f"webhooks[{i}]"
        check_spec_host(hook.url, allow, f"{where}.url")
        unknown = [e for e in hook.events if e not in DELIVERABLE]
        if unknown:
            raise SpecError(f"{where}.events: {unknown[0]!r} is not an event a webhook can receive")
        if hook.secret_env is not None and hook.secret_env not in secret_envs(settings):
            raise SpecError(
                f"{where}.secret_env: {hook.secret_env!r} is not a variable specs may name "
                "(the deployment lists those in AGENTQ_ALLOW_HTTP_ENVS)"
            )
