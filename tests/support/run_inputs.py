"""The run the run-state tests start from: a scripted model with nothing scripted, the
prompt "go" and one function tool `t`, created straight through the store (no worker,
no spec resolution)."""

from __future__ import annotations

import json
from typing import Any

from agentq.orchestrator.core.messages import UserMessage
from agentq.orchestrator.runs.state import CreateRun
from agentq.orchestrator.runs.transitions import model_job

SPEC = json.dumps({"model": {"provider": "scripted", "script": []}, "prompt": "go"})
TOOL = json.dumps({"name": "t", "kind": "function", "queue": "tools"})


def one_tool_run(run_id: str, *, spec_hash: str = "h", at: float | None = None) -> CreateRun:
    """The run `run_id`'s creation, its first model job queued; `at`: its clock (now)."""
    clock: dict[str, Any] = {} if at is None else {"at": at}
    return CreateRun(
        run_id=run_id,
        spec=SPEC,
        spec_hash=spec_hash,
        tools={"t": TOOL},
        tool_order=["t"],
        messages=[UserMessage(content="go").model_dump_json()],
        trace="{}",
        event=json.dumps({"type": "start", "run_id": run_id, "at": 0}),
        next_job=model_job(run_id, 0),
        **clock,
    )
