"""A run's guardrails asked by the model step: its input before step 0 and its answer at
the end, and a call's input (answers.py); a tool's output is guarded wherever it comes
from (orchestrator/runs/result_guards.py).

Each guard is a `@guardrail` hook, called as every hook is (hook_calls.py: here when
this worker registered it, else as a `hook` job); the first that trips decides. At the
model step a guard that raises, is served by no live worker or does not answer in time
fails the run as any hook does (`hook`); a trip of the run's input or output fails it
`guardrail-tripped`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentq.orchestrator.core.messages import Message
from agentq.orchestrator.loop.plan import StepPlan
from agentq.orchestrator.policy.guardrails import GuardCheck, GuardEntry, Stage, Trip
from agentq.orchestrator.runs import result_guards
from agentq.orchestrator.runs.hook_jobs import HookFailed
from agentq.orchestrator.runs.state import StepAfter
from agentq.orchestrator.runs.store import RunStore
from agentq.orchestrator.spec.run import RunSpec
from agentq.workers.steps import hook_calls
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
    names: Sequence[GuardEntry],
    value: Any,
) -> Trip | None:
    """Raises StepPreparationFailed when a guard cannot answer."""
    check = GuardCheck(stage=stage, value=value)
    try:
        return await result_guards.first_trip(
            store, run_id, step, names, check, spec.model.timeout_s, hook_calls.call
        )
    except HookFailed as exc:
        raise StepPreparationFailed(exc.message) from exc
