"""A run's guardrails asked at the model step: its input before step 0, its answer at
the end.

Each guard is a `@guardrail` hook, called as every hook is (hook_calls.py: here when
this worker registered it, else as a `hook` job); the first that trips decides. A
guard that raises, is served by no live worker or does not answer in time fails the
run as any hook does (`hook`); a trip fails it `guardrail-tripped`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.loop.plan import StepPlan
from agentq.orchestrator.loop.prepare import GUARDRAIL_KIND
from agentq.orchestrator.policy.guardrails import GuardCheck, Stage, Trip
from agentq.orchestrator.runs.state import StepAfter
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.steps import hook_calls
from agentq.workers.steps.hook_calls import HookFailed, HookRequest
from agentq.workers.steps.prepare import StepPreparationFailed


async def input_trip(
    store: RunStore, run_id: str, step: int, spec: RunSpec, messages: Sequence[Message]
) -> Trip | None:
    """Step 0's input guards, asked about the run's input messages (later steps: none)."""
    if step != 0 or spec.guardrails is None:
        return None
    value = [m.model_dump(mode="json") for m in messages]
    return await _first_trip(store, run_id, step, spec, "input", spec.guardrails.input, value)


async def output_trip(
    store: RunStore, run_id: str, spec: RunSpec, planned: StepPlan
) -> Trip | None:
    """The output guards, asked about the answer of the step that ends the run (its
    structured output when the run asks for one, else its text)."""
    if spec.guardrails is None or not _ends_run(planned):
        return None
    value = planned.output if spec.output is not None else planned.text
    names = spec.guardrails.output
    return await _first_trip(store, run_id, planned.step, spec, "output", names, value)


def _ends_run(planned: StepPlan) -> bool:
    """The run finishes with this step: nothing left to run, or a stop condition (or
    `max_steps`) ends it once its tool results are in."""
    ends = planned.finishes_now or planned.after == StepAfter.FINISH
    return ends and planned.retry is None and planned.output_failure is None


async def _first_trip(
    store: RunStore,
    run_id: str,
    step: int,
    spec: RunSpec,
    stage: Stage,
    names: Sequence[str],
    value: Any,
) -> Trip | None:
    """Raises StepPreparationFailed when a guard cannot answer."""
    check = GuardCheck(stage=stage, value=value).model_dump(mode="json")
    for name in names:
        request = HookRequest(kind=GUARDRAIL_KIND, name=name, args=[check])
        try:
            reason = await hook_calls.call(store, run_id, step, request, spec.model.timeout_s)
        except HookFailed as exc:
            raise StepPreparationFailed(exc.message) from exc
        if reason is not None:
            if not isinstance(reason, str) or not reason:
                raise StepPreparationFailed(f"{request.label} answered {reason!r}")
            return Trip(guardrail=name, stage=stage, reason=reason)
    return None
