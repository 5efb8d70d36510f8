"""What a step's answer means for a run's structured output (pure): a valid output ends
the run; an invalid one goes back to the model, until its retries are spent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentq.orchestrator.core.messages import Message, TextPart, ToolMessage, UserMessage
from agentq.orchestrator.output.instructions import RETRY_PREFIX, retry_text
from agentq.orchestrator.output.spec import EffectiveMode, OutputSpec
from agentq.orchestrator.output.validation import parse_json_text, schema_problems


class StepOutput(BaseModel):
    """The output a step is asked for: the spec, the mode this step's endpoint uses, and
    how many invalid attempts the history holds already."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: OutputSpec
    mode: EffectiveMode
    attempts: int = 0

    @property
    def native_schema(self) -> dict[str, Any] | None:
        """The schema the provider's response format carries (native mode only)."""
        return self.spec.schema_ if self.mode == "native" else None

    @property
    def spent(self) -> bool:
        """No retry is left: the next invalid attempt fails the run."""
        return self.attempts >= self.spec.max_retries


@dataclass(frozen=True)
class Verdict:
    """One attempt judged: `value` is what the model gave (parsed when it parsed)."""

    value: Any
    problems: list[str]

    @property
    def valid(self) -> bool:
        return not self.problems

    def retry(self, mode: EffectiveMode) -> str:
        return retry_text(self.problems, mode=mode)


def judge_text(spec: OutputSpec, text: str) -> Verdict:
    """A final text (prompted and native modes): the JSON it holds, against the schema."""
    try:
        value = parse_json_text(text)
    except ValueError as exc:
        return Verdict(text, [f"(root): {exc}"])
    return Verdict(value, schema_problems(spec.schema_, value))


def judge_value(spec: OutputSpec, value: Any) -> Verdict:
    """The final-answer tool's input (tool mode), parsed or left as the raw text."""
    if isinstance(value, str):
        return Verdict(value, [f"(root): the arguments are not a JSON object: {value[:200]!r}"])
    return Verdict(value, schema_problems(spec.schema_, value))


def attempts_in(history: Sequence[Message]) -> int:
    """How many invalid outputs the history sent back: each left one message (a user
    message, or the final-answer tool's error) that opens with RETRY_PREFIX."""
    count = 0
    for message in history:
        if isinstance(message, UserMessage) and not isinstance(message.content, str):
            count += any(_is_retry(p.text) for p in message.content if isinstance(p, TextPart))
        elif isinstance(message, UserMessage):
            count += _is_retry(message.content)
        elif isinstance(message, ToolMessage):
            count += sum(p.is_error and _is_retry(p.output) for p in message.content)
    return count


def _is_retry(text: Any) -> bool:
    return isinstance(text, str) and text.startswith(RETRY_PREFIX)


class OutputFailure(BaseModel):
    """The run ends without a valid output: why, and the last attempt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    message: str
    attempt: Any = None


def failure(output: StepOutput, verdict: Verdict | None, *, ended: bool = False) -> OutputFailure:
    """The retries are spent (`verdict`: the last attempt), or the run ends another way
    (`ended`: max_steps or a stop condition) before a valid output."""
    attempt = verdict.value if verdict is not None else None
    if ended or verdict is None:
        message = "the run reached max_steps or a stop condition before a valid output"
        return OutputFailure(message=message, attempt=attempt)
    problems = "; ".join(verdict.problems)
    return OutputFailure(
        message=f"the output is invalid after {output.attempts} retries: {problems}",
        attempt=attempt,
    )
