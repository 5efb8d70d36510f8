"""Stop conditions: when a run ends before `max_steps`, declared in its spec.

`stop_when` is a list; any element that holds ends the run once the step's tool
results are in. An element is a leaf (`has_tool_call`, `step_count_is`,
`has_text_matching`, `usage_exceeds`, `output_valid`, `hook`) or a group (`all`,
`any`) of elements. Evaluation is pure: the worker gathers the facts (the run's token
total, what the named `@stop_when` hooks answered) and `stop_reason` decides,
naming the element that matched so the run's `finish_reason` says why it ended.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag, field_validator

from agentq.orchestrator.core import spec_regex
from agentq.orchestrator.core.spec_model import SpecModel

# A registered hook's name (as `prepare_step`'s).
HOOK_NAME = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"


class HasToolCall(SpecModel):
    has_tool_call: str


class StepCountIs(SpecModel):
    step_count_is: int = Field(ge=1)


class HasTextMatching(SpecModel):
    """The step's text matches this regular expression (searched for, as `re.search`
    does), within the bounds of orchestrator/core/spec_regex.py."""

    has_text_matching: str = Field(min_length=1)

    @field_validator("has_text_matching")
    @classmethod
    def _bounded(cls, value: str) -> str:
        spec_regex.check_pattern(value)
        return value


class UsageExceeds(SpecModel):
    """The run's tokens so far (input + output, this step included) exceed this."""

    usage_exceeds: int = Field(ge=0)


class OutputValid(SpecModel):
    """The step gave a valid structured output (a spec with `output` only: checked at
    submit). A valid output ends the run anyway; naming it says so in `finish_reason`
    and lets a group combine it with other conditions."""

    output_valid: Literal[True]


class StopHook(SpecModel):
    """A `@stop_when` function a worker registered, called with the step's result."""

    hook: str = Field(pattern=HOOK_NAME)


class AllOf(SpecModel):
    all: list[StopCondition] = Field(min_length=1)


class AnyOf(SpecModel):
    any: list[StopCondition] = Field(min_length=1)


_KINDS = (
    "has_tool_call",
    "step_count_is",
    "has_text_matching",
    "usage_exceeds",
    "output_valid",
    "hook",
    "all",
    "any",
)


def _kind(value: Any) -> str | None:
    """Which kind an element is: its one key (pydantic then reports only that kind's
    errors, a line a user can act on)."""
    if isinstance(value, SpecModel):
        return next(iter(type(value).model_fields))
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        return key if key in _KINDS else None
    return None


StopCondition = Annotated[
    Union[  # noqa: UP007 (Tag needs each member annotated in a Union)
        Annotated[HasToolCall, Tag("has_tool_call")],
        Annotated[StepCountIs, Tag("step_count_is")],
        Annotated[HasTextMatching, Tag("has_text_matching")],
        Annotated[UsageExceeds, Tag("usage_exceeds")],
        Annotated[OutputValid, Tag("output_valid")],
        Annotated[StopHook, Tag("hook")],
        Annotated[AllOf, Tag("all")],
        Annotated[AnyOf, Tag("any")],
    ],
    Discriminator(
        _kind,
        custom_error_type="stop_condition",
        custom_error_message=f"a stop condition has one key, one of: {', '.join(_KINDS)}",
    ),
]
AllOf.model_rebuild()
AnyOf.model_rebuild()


@dataclass(frozen=True)
class StepFacts:
    """What the conditions are judged on, for the step just answered."""

    step: int
    call_names: frozenset[str] = frozenset()
    text: str = ""
    # The run's tokens with this step's (read only when a condition asks: see needs_usage).
    run_tokens: int = 0
    # Whether the step's answer is a valid structured output (orchestrator/output/judge.py).
    output_valid: bool = False
    # What each named hook answered (hook_names); a hook not asked counts as False.
    hooks: Mapping[str, bool] = field(default_factory=dict)


def holds(cond: StopCondition, facts: StepFacts) -> bool:
    match cond:
        case HasToolCall(has_tool_call=name):
            return name in facts.call_names
        case StepCountIs(step_count_is=n):
            return facts.step + 1 >= n
        case HasTextMatching(has_text_matching=pattern):
            return spec_regex.search(pattern, facts.text)
        case UsageExceeds(usage_exceeds=limit):
            return facts.run_tokens > limit
        case OutputValid():
            return facts.output_valid
        case StopHook(hook=name):
            return facts.hooks.get(name, False)
        case AllOf(all=group):
            return all(holds(c, facts) for c in group)
        case AnyOf(any=group):
            return any(holds(c, facts) for c in group)
    raise AssertionError(f"unknown stop condition {cond!r}")


def describe(cond: StopCondition) -> str:
    """The condition as `finish_reason` names it, e.g. `has_text_matching 'DONE'`."""
    match cond:
        case HasToolCall(has_tool_call=name):
            return f"has_tool_call {name!r}"
        case StepCountIs(step_count_is=n):
            return f"step_count_is {n}"
        case HasTextMatching(has_text_matching=pattern):
            return f"has_text_matching {pattern!r}"
        case UsageExceeds(usage_exceeds=limit):
            return f"usage_exceeds {limit}"
        case OutputValid():
            return "output_valid"
        case StopHook(hook=name):
            return f"hook {name!r}"
        case AllOf(all=group):
            return "all [" + ", ".join(describe(c) for c in group) + "]"
        case AnyOf(any=group):
            return "any [" + ", ".join(describe(c) for c in group) + "]"
    raise AssertionError(f"unknown stop condition {cond!r}")


def stop_reason(conditions: Sequence[StopCondition], facts: StepFacts) -> str | None:
    """`stop_when: <the first element that holds>`, or None: the run goes on. Raises
    ExpressionLimitError when a pattern runs past its time."""
    for cond in conditions:
        if holds(cond, facts):
            return f"stop_when: {describe(cond)}"
    return None


def leaves(
    conditions: Sequence[StopCondition], where: str = "stop_when"
) -> Iterator[tuple[str, StopCondition]]:
    """Every leaf condition, inside groups too, with where it is (`stop_when[0].all[1]`)."""
    for i, cond in enumerate(conditions):
        if isinstance(cond, AllOf):
            yield from leaves(cond.all, f"{where}[{i}].all")
        elif isinstance(cond, AnyOf):
            yield from leaves(cond.any, f"{where}[{i}].any")
        else:
            yield f"{where}[{i}]", cond


def hook_names(conditions: Sequence[StopCondition]) -> list[str]:
    """The hooks the conditions name, each once, in order (each is called every step)."""
    names = [c.hook for _, c in leaves(conditions) if isinstance(c, StopHook)]
    return list(dict.fromkeys(names))


def needs_usage(conditions: Sequence[StopCondition]) -> bool:
    """Whether judging needs the run's token total (one read of the run per step)."""
    return any(isinstance(c, UsageExceeds) for _, c in leaves(conditions))
