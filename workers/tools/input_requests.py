"""Forwarding a running call's questions (MCP elicitation, sampling) to its caller.

The question goes through the call's home (orchestrator/calls/home.py): a run's call
parks the run with a `tool-input-request` event until an answer is posted (`agentq
answer` / `Runs.answer`), its park timeout passes or its own deadline does; a call
without a run asks on its own stream until its deadline. The call goes on either way.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from agentq.orchestrator.calls.home import CallHome, InputAsk
from agentq.orchestrator.loop.plan import CallPlan


class InputRequests:
    """The `elicit` callable of one tool call's context, and its `sample` (a model's
    answer asked for the same way: `"kind": "sampling"`, the request as `input`)."""

    def __init__(
        self,
        home: CallHome,
        call: CallPlan,
        *,
        attempt: int,
        deadline_at: float,
        park_timeout_s: float | None = None,
    ) -> None:
        self.home = home
        self.call = call
        self.deadline_at = deadline_at
        self.park_timeout_s = park_timeout_s
        # Ids differ across attempts, so a re-delivered call never reads an old answer.
        self._ids = (f"{call.id}.{attempt}.{n}" for n in itertools.count(1))

    async def __call__(self, message: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        return await self._ask(message=message, input=schema)

    async def sample(self, request: dict[str, Any]) -> dict[str, Any] | None:
        return await self._ask(kind="sampling", message="", input=request)

    async def _ask(
        self, *, message: str, input: dict[str, Any], kind: str | None = None
    ) -> dict[str, Any] | None:
        raw = await self.home.ask(
            InputAsk(
                request_id=next(self._ids),
                tool_name=self.call.name,
                message=message,
                input=input,
                deadline_at=self.deadline_at,
                park_timeout_s=self.park_timeout_s,
                kind=kind,
            )
        )
        if raw is None:
            return None
        answer = json.loads(raw)
        if answer.get("action") != "accept":
            return None
        content: dict[str, Any] = answer.get("content") or {}
        return content
