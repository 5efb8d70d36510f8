"""Approval rules: which calls of a tool wait for a person, decided per call.

A tool entry's `needs_approval` is `true`/`false`, a list of its tools' names, or a
rule: `{"when": "<JMESPath over the call's input>"}` (e.g. ``amount > `100` ``,
checked when the spec is read, evaluated within the bounds of spec_jmespath.py) or
`{"hook": NAME}`, a `@needs_approval` function a worker registered (asked by the model
step, its answer passed in here). Pure.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Discriminator, Field, Tag, field_validator

from agentq.orchestrator.core.spec_model import SpecModel
from agentq.orchestrator.policy import spec_jmespath
from agentq.orchestrator.policy.stop_conditions import HOOK_NAME


class ApprovalWhen(SpecModel):
    """The call waits when the expression, over its input, is true (JMESPath truthiness:
    false, null, "", [] and {} are false)."""

    when: str = Field(min_length=1)

    @field_validator("when")
    @classmethod
    def _bounded(cls, value: str) -> str:
        spec_jmespath.check_expression(value)
        return value


class ApprovalHook(SpecModel):
    """The call waits when the `@needs_approval` function NAME says so."""

    hook: str = Field(pattern=HOOK_NAME)


ApprovalRule = ApprovalWhen | ApprovalHook


def _kind(value: Any) -> str | None:
    """Which form `needs_approval` takes (pydantic then reports only its errors)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        return "names"
    if isinstance(value, ApprovalWhen) or (isinstance(value, dict) and "when" in value):
        return "when"
    if isinstance(value, ApprovalHook) or (isinstance(value, dict) and "hook" in value):
        return "hook"
    return None


NeedsApproval = Annotated[
    Union[  # noqa: UP007 (Tag needs each member annotated in a Union)
        Annotated[bool, Tag("bool")],
        Annotated[list[str], Tag("names")],
        Annotated[ApprovalWhen, Tag("when")],
        Annotated[ApprovalHook, Tag("hook")],
    ],
    Discriminator(
        _kind,
        custom_error_type="needs_approval",
        custom_error_message=(
            'needs_approval is true/false, a list of tool names, {"when": "<JMESPath>"} '
            'or {"hook": "<name>"}'
        ),
    ),
]


def asks(rule: ApprovalRule, value: Any, hook_answer: bool | None = None) -> bool:
    """Whether a call with this input waits for approval. `hook_answer`: what the
    rule's hook said (None: not asked, e.g. the input was invalid: no approval). Raises
    ExpressionLimitError when the rule runs past its bounds."""
    if isinstance(rule, ApprovalHook):
        return bool(hook_answer)
    return spec_jmespath.truthy(spec_jmespath.search(rule.when, value))
