"""`agentq serve`: the HTTP front door (REST + SSE, an AI SDK chat endpoint, a dashboard).

Every endpoint is thin over `agentq.orchestrator.client.Client`; the service keeps no
state of its own beyond Redis, so any number of replicas can run side by side.
"""

from agentq.serve.app import create_app
from agentq.serve.config import ServeConfig

__all__ = ["ServeConfig", "create_app"]
