"""Forwarding a running call's questions (MCP elicitation) to whoever drives the run.

The call parks the run with a `tool-input-request` event and waits, on its
worker, until an answer is posted (`agentq answer` / `Runs.answer`), its park
timeout passes or its own deadline does; the run resumes where it was either way.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from agentq.orchestrator.redis.connect import MAX_BLOCK_S
from agentq.orchestrator.runs.state import InputStatus, Outcome
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.runs.transitions import input_answer_args, input_request_args


class InputRequests:
    """The `elicit` callable of one tool call's context."""

    def __init__(
        self,
        store: RunStore,
        *,
        run_id: str,
        step: int,
        call_id: str,
        tool_name: str,
        attempt: int,
        deadline_at: float,
        park_timeout_s: float | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.step = step
        self.call_id = call_id
        self.tool_name = tool_name
        self.deadline_at = deadline_at
        self.park_timeout_s = park_timeout_s
        # Ids differ across attempts, so a re-delivered call never reads an old answer.
        self._ids = (f"{call_id}.{attempt}.{n}" for n in itertools.count(1))

    def _wait_s(self) -> float:
        """Until the call's deadline, and no longer than a parked call may wait."""
        remaining_s = max(0.0, self.deadline_at - time.time())
        if self.park_timeout_s is None:
            return remaining_s
        return min(remaining_s, self.park_timeout_s)

    async def __call__(self, message: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        request_id = next(self._ids)
        requested = await self.store.input_request(
            input_request_args(
                self.run_id,
                self.step,
                call_id=self.call_id,
                tool_name=self.tool_name,
                request_id=request_id,
                message=message,
                schema=schema,
            ),
        )
        if requested.outcome != Outcome.PARKED:
            return None
        raw = None
        # Block in slices: a blocking read longer than the socket timeout would look
        # like a stalled Redis.
        wait_until = time.time() + self._wait_s()
        while raw is None and time.time() < wait_until:
            slice_s = min(MAX_BLOCK_S, max(0.0, wait_until - time.time()))
            raw = await self.store.wait_answer(self.run_id, request_id, slice_s)
        if raw is None:
            await self.store.input_answer(
                input_answer_args(
                    self.run_id,
                    self.step,
                    request_id=request_id,
                    call_id=self.call_id,
                    outcome=InputStatus.EXPIRED,
                ),
            )
            return None
        answer = json.loads(raw)
        if answer.get("action") != "accept":
            return None
        content: dict[str, Any] = answer.get("content") or {}
        return content
