"""The pure core of the loop: what a model step's answer means for the run.

`plan_step` turns a model response into a `StepPlan`: every call gets an id,
its input parsed and validated against the frozen schema, and a disposition
(run it on a queue, park it for approval or for an outside result, or answer
it at once with a tool error). It also fixes what happens once the step's
results are all in (`after`). No I/O: the store applies the plan atomically.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentq.orchestrator.core.errors import ToolInputError
from agentq.orchestrator.core.json_schema import validator_for
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    AssistantPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    UserMessage,
)
from agentq.orchestrator.core.model_io import FinishReason, ModelResponse, ProviderToolCall
from agentq.orchestrator.core.tool_errors import OnError, ToolErrorKind
from agentq.orchestrator.loop.coercion import coerce_input
from agentq.orchestrator.output.instructions import OUTPUT_TOOL
from agentq.orchestrator.output.judge import (
    OutputFailure,
    StepOutput,
    Verdict,
    failure,
    judge_text,
    judge_value,
)
from agentq.orchestrator.output.spec import EffectiveMode
from agentq.orchestrator.policy.approval_rules import asks
from agentq.orchestrator.policy.guardrails import Trip
from agentq.orchestrator.policy.stop_conditions import StepFacts, stop_reason
from agentq.orchestrator.runs.state import CallStatus, RunFailure, StepAfter
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolDef, tool_needs

After = StepAfter  # the name this module always used


class CallPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    input: Any = None
    status: CallStatus
    queue: str | None = None
    # What a worker of the queue must serve to take the call's job (ToolKindPlugin.needs).
    needs: str = ""
    timeout_s: float = 60.0
    # How long the call may stay parked (approval, outside result) before it becomes a
    # tool error; None: no deadline.
    park_timeout_s: float | None = None
    # A parked call a `start_call` job on this queue starts (see ToolDef.start_queue).
    start_queue: str | None = None
    # Set when the call is answered at once (bad input, unknown tool, provider-executed).
    result: ToolResultPart | None = None
    # Where its input was coerced to the schema (orchestrator/loop/coercion.py), if anywhere.
    coerced: list[str] = Field(default_factory=list)
    # Read by the result's transition (prelude.lua: tool_failure): fail-run ends the run.
    on_error: OnError = OnError.MODEL


class Answers(BaseModel):
    """What the worker gathered before planning, for the decisions that are not the
    response's alone: the run's tokens before this step, what the `@stop_when` hooks the
    spec names and the `@needs_approval` hooks of the calls' tools answered, which calls
    a `tool_input` guardrail tripped on. Stored with the step, so a replay plans as the
    run did."""

    model_config = ConfigDict(extra="forbid")

    run_tokens: int = 0
    stop_hooks: dict[str, bool] = Field(default_factory=dict)
    # Call id -> what its tool's `@needs_approval` hook answered.
    approvals: dict[str, bool] = Field(default_factory=dict)
    # Call id -> the `tool_input` guardrail that tripped on its input (it is not run).
    tool_trips: dict[str, Trip] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        # Every field's default is its empty value (0, {}): no default instance built
        # and compared field by field on each step's record, nor the fields looked up.
        return not any(map(self.__dict__.__getitem__, _ANSWER_FIELDS))


_ANSWER_FIELDS = tuple(Answers.model_fields)


class StepPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: int
    text: str
    finish_reason: FinishReason
    usage: Usage = Field(default_factory=Usage)
    calls: list[CallPlan]
    after: StepAfter
    # The stop condition that ends the run with this step (the run's finish_reason).
    stop_reason: str | None = None
    answers: Answers = Field(default_factory=Answers)
    provider_metadata: dict[str, Any] = Field(default_factory=dict)
    # What prepareStep and context management made of the step (workers/steps/prepare.py).
    prepared: dict[str, Any] | None = None
    # Structured output (orchestrator/output/): the valid output this step gave (the run
    # ends with it), the message an invalid one goes back with, or why the run fails.
    output: Any = None
    retry: UserMessage | None = None
    output_failure: OutputFailure | None = None
    # The mode the step asked in (recorded: a replay judges the answer as it was asked).
    output_mode: EffectiveMode | None = None
    # The run fails once this step is recorded: it went over a budget (loop/budget.py).
    budget_failure: RunFailure | None = None

    @property
    def local_calls(self) -> list[CallPlan]:
        """The calls this system answers (not executed inside the provider)."""
        return [c for c in self.calls if not _provider_executed(c)]

    @property
    def finishes_now(self) -> bool:
        """Nothing for us to run or wait for: the run ends with this step."""
        return not self.local_calls and self.retry is None

    def assistant_message(self) -> AssistantMessage:
        parts: list[AssistantPart] = []
        if self.text:
            parts.append(TextPart(text=self.text))
        for call in self.calls:
            executed = _provider_executed(call)
            parts.append(
                ToolCallPart(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    input=call.input,
                    provider_executed=executed,
                )
            )
            if executed and call.result is not None:
                parts.append(call.result)
        return AssistantMessage(content=parts, provider_metadata=self.provider_metadata)


def _provider_executed(call: CallPlan) -> bool:
    return call.result is not None and call.result.provider_executed


def offered_tools(spec: RunSpec, tools: list[ToolDef]) -> list[ToolDef]:
    """The tools the model may call this run: all, or those named in active_tools."""
    if spec.tool_choice == "none":
        return []
    if spec.active_tools is None:
        return list(tools)
    active = set(spec.active_tools)
    return [t for t in tools if t.name in active]


def plan_step(
    spec: RunSpec,
    tools: list[ToolDef],
    step: int,
    response: ModelResponse,
    answers: Answers | None = None,
    output: StepOutput | None = None,
) -> StepPlan:
    """`answers`: what the worker gathered for the stop conditions; `output`: the
    structured output the run asks for (None: its answer is its text)."""
    answers = answers or Answers()
    by_name = {t.name: t for t in offered_tools(spec, tools)}
    calls = [
        _plan_call(call_id, raw, by_name, answers.approvals.get(call_id))
        if call_id not in answers.tool_trips
        else _tripped_call(call_id, raw, by_name.get(raw.name), answers.tool_trips[call_id])
        for call_id, raw in zip(call_ids(step, response), response.tool_calls, strict=True)
    ]
    # Judged first: whether the output is valid is a fact the stop conditions read.
    verdict = None if output is None else _judge_output(calls, response.text, output)
    facts = StepFacts(
        step=step,
        call_names=frozenset(c.name for c in calls),
        text=response.text,
        run_tokens=answers.run_tokens + response.usage.total_tokens,
        hooks=answers.stop_hooks,
        output_valid=verdict is not None and verdict.valid,
    )
    last, reason = step_end(spec, facts)
    planned = StepPlan(
        step=step,
        text=response.text,
        finish_reason=response.finish_reason,
        usage=response.usage,
        calls=calls,
        after=StepAfter.FINISH if last else StepAfter.CONTINUE,
        stop_reason=reason,
        answers=answers,
        provider_metadata=response.provider_metadata,
    )
    return planned if output is None else _with_output(planned, output, verdict)


def _judge_output(calls: list[CallPlan], text: str, output: StepOutput) -> Verdict | None:
    """The step's answer judged for the run's output; None while the model is still at
    work (calls of its own tools, and no final-answer call)."""
    local = [c for c in calls if not _provider_executed(c)]
    if output.mode == "tool":
        answer = _output_call(local)
        if answer is not None:
            return judge_value(output.spec, answer.input)
        if not local:
            return Verdict(text, [f"(root): the answer did not call {OUTPUT_TOOL}"])
        return None
    return None if local else judge_text(output.spec, text)


def _output_call(calls: list[CallPlan]) -> CallPlan | None:
    return next((c for c in calls if c.name == OUTPUT_TOOL), None)


def _with_output(planned: StepPlan, output: StepOutput, verdict: Verdict | None) -> StepPlan:
    """The step judged for the run's output: a valid one ends the run with it; an invalid
    one goes back to the model (tool mode: as the final-answer tool's error; otherwise as
    a user message after the answer) until the retries are spent, then the run fails."""
    planned.output_mode = output.mode
    answer = _output_call(planned.local_calls) if output.mode == "tool" else None
    if answer is not None and verdict is not None:
        _answer_output_call(planned, answer, verdict, output)
    if verdict is not None and verdict.valid:
        planned.output = verdict.value
        planned.after = StepAfter.FINISH
        return planned
    if planned.after == StepAfter.FINISH:
        planned.output_failure = failure(output, verdict, ended=True)
    elif verdict is not None and output.spent:
        planned.output_failure = failure(output, verdict)
    elif verdict is not None and not planned.local_calls:
        planned.retry = UserMessage(content=verdict.retry(output.mode))
    return planned


def _answer_output_call(
    planned: StepPlan, answer: CallPlan, verdict: Verdict, output: StepOutput
) -> None:
    """The final-answer call is answered at once: accepted (the step's other calls are
    not run, the run ends), or refused with what is wrong, as any invalid input is."""
    if not verdict.valid:
        text = verdict.retry(output.mode)
        answer.status, answer.result = (
            CallStatus.DONE,
            error_result(answer.id, OUTPUT_TOOL, text, ToolErrorKind.INVALID_INPUT),
        )
        answer.queue = None
        return
    for call in planned.local_calls:
        if call is answer:
            result = ToolResultPart(
                tool_call_id=call.id, tool_name=OUTPUT_TOOL, output="Final result accepted."
            )
        else:
            result = error_result(
                call.id,
                call.name,
                "Not run: the final answer came first.",
                ToolErrorKind.CANCELLED,
            )
        call.status, call.result, call.queue = CallStatus.DONE, result, None
        # Not run is not a failure of the tool: the run ends with the answer.
        call.on_error = OnError.MODEL


def call_ids(step: int, response: ModelResponse) -> list[str]:
    """The id each call of the response gets. Ids the model gave are kept; a missing or
    repeated one gets a fresh id that collides with none of them (ids key the call's state
    and its job)."""
    taken = {raw.id for raw in response.tool_calls if raw.id}
    ids: list[str] = []
    seen: set[str] = set()
    for index, raw in enumerate(response.tool_calls):
        call_id = raw.id if raw.id and raw.id not in seen else ""
        if not call_id:
            call_id = f"call_{step}_{index}"
            while call_id in taken or call_id in seen:
                call_id += "_"
        seen.add(call_id)
        ids.append(call_id)
    return ids


def input_error(tool: ToolDef, arguments: str | dict[str, Any] | list[Any] | None) -> str | None:
    """Why these arguments are not a valid input for the tool, or None if they are."""
    try:
        checked_input(tool, arguments)
    except ToolInputError as exc:
        return exc.message
    return None


def checked_input(
    tool: ToolDef, arguments: str | dict[str, Any] | list[Any] | None
) -> tuple[Any, list[str]]:
    """(the call's input, where it was coerced): parsed, coerced where that loses nothing
    (unless the tool turns it off), and valid against the schema; ToolInputError if not."""
    value = parse_arguments(arguments)
    coerced: list[str] = []
    if tool.coerce:
        value, coerced = coerce_input(tool.input_schema, value)
    validate_input(tool, value)
    return value, coerced


def _plan_call(
    call_id: str, raw: ProviderToolCall, by_name: dict[str, ToolDef], approval: bool | None
) -> CallPlan:
    if raw.provider_executed:
        return CallPlan(
            id=call_id,
            name=raw.name,
            input=lenient_parse(raw.arguments),
            status=CallStatus.DONE,
            result=ToolResultPart(
                tool_call_id=call_id,
                tool_name=raw.name,
                output=raw.provider_result,
                provider_executed=True,
            ),
        )
    if raw.parse_error is not None:
        return _error_call(
            call_id,
            raw.name,
            lenient_parse(raw.arguments),
            raw.parse_error,
            ToolErrorKind.INVALID_INPUT,
        )
    tool = by_name.get(raw.name)
    if tool is None:
        available = ", ".join(sorted(by_name)) or "none"
        return _error_call(
            call_id,
            raw.name,
            lenient_parse(raw.arguments),
            f"Model tried to call unavailable tool {raw.name!r}. Available tools: {available}.",
            ToolErrorKind.NO_SUCH_TOOL,
        )
    try:
        value, coerced = checked_input(tool, raw.arguments)
    except ToolInputError as exc:
        refused = lenient_parse(raw.arguments)
        return _error_call(call_id, raw.name, refused, exc.message, exc.kind, tool.on_error)
    return CallPlan(
        id=call_id,
        name=tool.name,
        input=value,
        coerced=coerced,
        status=_initial_status(tool, value, approval),
        queue=tool.queue,
        needs=tool_needs(tool),
        timeout_s=tool.timeout_s,
        park_timeout_s=tool.park_timeout_s,
        start_queue=tool.start_queue,
        on_error=tool.on_error,
    )


def _initial_status(tool: ToolDef, value: Any, approval: bool | None) -> CallStatus:
    """`approval`: what the tool's approval hook answered for this call, if it has one."""
    if tool.needs_approval or (
        tool.approval_rule is not None and asks(tool.approval_rule, value, approval)
    ):
        return CallStatus.AWAITING_APPROVAL
    if tool.queue is None:
        return CallStatus.AWAITING_RESULT
    return CallStatus.QUEUED


def status_after_approval(tool: ToolDef) -> CallStatus:
    return CallStatus.AWAITING_RESULT if tool.queue is None else CallStatus.QUEUED


def _tripped_call(
    call_id: str, raw: ProviderToolCall, tool: ToolDef | None, trip: Trip
) -> CallPlan:
    """A call a `tool_input` guardrail refused: not run, a denial its tool's on_error
    treats as any other error."""
    on_error = tool.on_error if tool is not None else OnError.MODEL
    value = lenient_parse(raw.arguments)
    return _error_call(call_id, raw.name, value, trip.message, ToolErrorKind.DENIED, on_error)


def _error_call(
    call_id: str,
    name: str,
    value: Any,
    message: str,
    kind: ToolErrorKind,
    on_error: OnError = OnError.MODEL,
) -> CallPlan:
    return CallPlan(
        id=call_id,
        name=name,
        input=value,
        status=CallStatus.DONE,
        result=error_result(call_id, name, message, kind),
        on_error=on_error,
    )


def error_result(call_id: str, name: str, message: str, kind: ToolErrorKind) -> ToolResultPart:
    return ToolResultPart(
        tool_call_id=call_id, tool_name=name, output=message, is_error=True, error_kind=kind
    )


def parse_arguments(arguments: str | dict[str, Any] | list[Any] | None) -> Any:
    if arguments is None:
        return {}
    if not isinstance(arguments, str):
        return arguments
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except ValueError as exc:
        raise ToolInputError(
            f"Invalid arguments: could not parse {arguments[:200]!r} as JSON ({exc})"
        ) from None


def lenient_parse(arguments: str | dict[str, Any] | list[Any] | None) -> Any:
    try:
        return parse_arguments(arguments)
    except ToolInputError:
        return arguments


def validate_input(tool: ToolDef, value: Any) -> None:
    """Raise ToolInputError naming every violation of the tool's input schema."""
    from jsonschema.exceptions import SchemaError  # jsonschema loads on first use

    try:
        validator = validator_for(tool.input_schema)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    except SchemaError as exc:
        raise ToolInputError(f"Tool {tool.name!r} has an invalid schema: {exc.message}") from None
    if errors:
        details = "; ".join(
            f"{'/'.join(str(p) for p in e.path) or '(input)'}: {e.message}" for e in errors[:5]
        )
        raise ToolInputError(f"Invalid input for tool {tool.name!r}: {details}")


def step_end(spec: RunSpec, facts: StepFacts) -> tuple[bool, str | None]:
    """Whether the run ends once this step's tool results are in, and the stop condition
    that ends it (None when it is `max_steps`, or nothing)."""
    reason = stop_reason(spec.stop_when, facts)
    return reason is not None or facts.step + 1 >= spec.max_steps, reason
