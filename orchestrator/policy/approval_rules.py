"""Approval rules: which calls of a tool wait for a person, decided per call.

A tool entry's `needs_approval` is `true`/`false`, a list of its tools' names, or a
rule: `{"when": "<JMESPath over the call's input>"}` (e.g. ``amount > `100` ``,
compiled when the spec is read) or `{"hook": NAME}`, a `@needs_approval` function a
worker registered (asked by the model step, its answer passed in here). Pure.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Union

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult
from pydantic import Discriminator, Field, Tag, field_validator

from agentq.orchestrator.core.spec_model import SpecModel
from agentq.orchestrator.policy.stop_conditions import HOOK_NAME


class ApprovalWhen(SpecModel):
    """The call waits when the expression, over its input, is true (JMESPath truthiness:
    false, null, "", [] and {} are false)."""

    when: str = Field(min_length=1, max_length=1000)

    @field_validator("when")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            _compiled(value)
        except JMESPathError as exc:
            raise ValueError(f"not a valid JMESPath expression: {_one_line(exc)}") from None
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


def _one_line(exc: JMESPathError) -> str:
    """jmespath's message is the expression drawn over lines; its first line and where."""
    first = str(exc).splitlines()[0].rstrip(":")
    where = getattr(exc, "lex_position", None)
    return first if where is None else f"{first} at position {where}"


@lru_cache(maxsize=256)
def _compiled(expression: str) -> ParsedResult:
    return jmespath.compile(expression)


def asks(rule: ApprovalRule, value: Any, hook_answer: bool | None = None) -> bool:
    """Whether a call with this input waits for approval. `hook_answer`: what the
    rule's hook said (None: not asked, e.g. the input was invalid: no approval)."""
    if isinstance(rule, ApprovalHook):
        return bool(hook_answer)
    return _truthy(_compiled(rule.when).search(value))


def _truthy(value: Any) -> bool:
    if value is None or value is False:
        return False
    return not (isinstance(value, str | list | dict) and len(value) == 0)
