"""The built-in llm guardrail: a model's verdict on what a guard checks.

A guardrail entry `{"llm": {"prompt", "model"}}` is asked as any `@guardrail` is (a hook
of its own kind, here or as a `hook` job: orchestrator/runs/result_guards.py); every
worker serves it with its own model client, so the check goes through the model-call
path every step takes (the deployment's endpoints and keys, rate limits, retries). The
model gets the prompt as its system message and what is checked as the user's; it must
answer by calling the one tool it is offered, `verdict`, with `{"tripped", "reason"}`.
The model was resolved at submit: only one the deployment offers.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from agentq.orchestrator.core.messages import UserMessage
from agentq.orchestrator.loop.plan import parse_arguments
from agentq.orchestrator.policy.guardrails import GuardCheck, LlmCheck, Verdict
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.spec.run import ToolChoiceTool
from agentq.workers.models import ModelRequest, OfferedTool
from agentq.workers.models.base import DiscardDeltas
from agentq.workers.models.model_client import ModelClient
from agentq.workers.steps.hooks import llm_guardrail

VERDICT_TOOL = "verdict"
_OFFERED = OfferedTool(
    name=VERDICT_TOOL,
    description="Give your verdict: tripped is true when the text breaks the rule, and why.",
    input_schema=Verdict.model_json_schema(),
)


def serve_llm_guard(models: ModelClient) -> None:
    """Serve the llm guardrail in this process, through `models`."""

    async def verdict(check: GuardCheck, llm: LlmCheck) -> str | None:
        model = ModelRef.model_validate(llm.model)
        request = ModelRequest(
            model=model,
            system=llm.prompt,
            messages=[UserMessage(content=shown(check))],
            tools=[_OFFERED],
            tool_choice=ToolChoiceTool(tool=VERDICT_TOOL),
            timeout_s=model.timeout_s,
        )
        response = await models.generate(request, DiscardDeltas())
        answer = next((c for c in response.tool_calls if c.name == VERDICT_TOOL), None)
        if answer is None:
            raise ValueError("the model gave no verdict")
        try:
            said = Verdict.model_validate(parse_arguments(answer.arguments))
        except ValidationError as exc:
            raise ValueError(f"the model's verdict is not one: {exc.errors()[0]['msg']}") from None
        if not said.tripped:
            return None
        return said.reason or "the model's verdict"

    llm_guardrail(verdict)


def shown(check: GuardCheck) -> str:
    """What the model is asked about: the stage, the call's tool, the value as JSON."""
    about: dict[str, Any] = {"stage": check.stage, "checked": to_jsonable_python(check.value)}
    if check.tool_name is not None:
        about["tool"] = check.tool_name
    return json.dumps(about, ensure_ascii=False)
