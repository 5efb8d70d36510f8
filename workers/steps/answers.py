"""What a step's plan needs besides the model's answer, gathered at the I/O edge.

The stop conditions are judged purely (orchestrator/policy/stop_conditions.py) on
facts some of which only a worker can get: the run's token total (read from the
run only when a `usage_exceeds` asks) and what the `@stop_when` hooks the spec
names answer when called with the step's result. They are gathered here, before
`plan_step`, and stored with the step (`Answers`), so a replay plans the same.
"""

from __future__ import annotations

from agentq.orchestrator import tracing
from agentq.orchestrator.loop.plan import Answers, call_ids, lenient_parse
from agentq.orchestrator.loop.prepare import STOP_WHEN_KIND
from agentq.orchestrator.policy.stop_conditions import hook_names, needs_usage
from agentq.orchestrator.runs.result import StepResult, ToolCallRecord
from agentq.orchestrator.runs.state import MetaField
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.models import ModelResponse
from agentq.workers.steps.hooks import rule_hook
from agentq.workers.steps.prepare import StepPreparationFailed


async def gather(
    store: RunStore, run_id: str, step: int, spec: RunSpec, response: ModelResponse
) -> Answers:
    """Raises StepPreparationFailed (the run fails) when a hook raises or is not here."""
    run_tokens = 0
    if needs_usage(spec.stop_when):
        # The totals before this step: the step's own usage is added when it commits.
        meta = await store.meta(run_id)
        run_tokens = int(meta.get(MetaField.USAGE_TOTAL, 0))
    names = hook_names(spec.stop_when)
    if not names:
        return Answers(run_tokens=run_tokens)
    result = step_result(step, response)
    stop_hooks = {name: await _ask(name, result) for name in names}
    return Answers(run_tokens=run_tokens, stop_hooks=stop_hooks)


def step_result(step: int, response: ModelResponse) -> StepResult:
    """The step as a `@stop_when` hook sees it: its text, calls and usage (its tool
    results are not in yet: the run ends once they are)."""
    return StepResult(
        index=step,
        text=response.text,
        tool_calls=[
            ToolCallRecord(id=call_id, name=raw.name, input=lenient_parse(raw.arguments))
            for call_id, raw in zip(call_ids(step, response), response.tool_calls, strict=True)
        ],
        finish_reason=response.finish_reason,
        usage=response.usage,
    )


async def _ask(name: str, result: StepResult) -> bool:
    hook = rule_hook(STOP_WHEN_KIND, name)
    if hook is None:
        raise StepPreparationFailed(
            f"stop_when hook {name!r} is not registered in the worker that ran the step "
            "(load its module in the model queue's workers)"
        )
    with tracing.span(f"stop_when {name}"):
        try:
            return await hook(result)
        except Exception as exc:
            tracing.record_exception(exc)
            raise StepPreparationFailed(
                f"stop_when hook {name!r} raised {type(exc).__name__}: {exc}"
            ) from exc
