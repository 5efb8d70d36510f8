"""A spec's `concurrency` and the key it resolves to at submit, pure."""

from __future__ import annotations

from typing import Any

from jmespath.exceptions import JMESPathError
from pydantic import Field, field_validator, model_validator

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.expression_limits import ExpressionLimitError
from agentq.orchestrator.core.fairness import FAIRNESS_KEY
from agentq.orchestrator.core.spec_model import SpecModel
from agentq.orchestrator.policy.spec_jmespath import check_expression, search

# Far above any real per-key limit (a key that many runs wide is no limit), low enough
# that a typo like 1e9 is refused rather than stored.
MAX_CONCURRENCY = 10_000
KEY_RULE = "1-128 letters, digits, '_', '.', ':', '@' or '-'"


class Concurrency(SpecModel):
    """At most `max` runs with this key hold a running job at once. The key is given
    (`key`) or read from the spec's metadata (`key_from`, JMESPath over
    `{"metadata": ...}`); either way it is the tenant's own."""

    key: str | None = None
    key_from: str | None = None
    max: int = Field(ge=1, le=MAX_CONCURRENCY)

    @field_validator("key")
    @classmethod
    def _check_key(cls, value: str | None) -> str | None:
        if value is not None and not FAIRNESS_KEY.match(value):
            raise ValueError(f"a concurrency key is {KEY_RULE}")
        return value

    @field_validator("key_from")
    @classmethod
    def _check_key_from(cls, value: str | None) -> str | None:
        if value is not None:
            check_expression(value)
        return value

    @model_validator(mode="after")
    def _one(self) -> Concurrency:
        if (self.key is None) == (self.key_from is None):
            raise ValueError("'concurrency' needs exactly one of 'key' and 'key_from'")
        return self

    def resolved(self, metadata: dict[str, Any]) -> str:
        """The key this run counts under; SpecError (one line) when `key_from` does not
        give a key."""
        if self.key is not None:
            return self.key
        assert self.key_from is not None
        try:
            found = search(self.key_from, {"metadata": metadata})
        except (ExpressionLimitError, JMESPathError) as exc:
            raise SpecError(f"concurrency.key_from: {str(exc).splitlines()[0]}") from None
        if isinstance(found, int | float) and not isinstance(found, bool):
            found = str(found)
        if not isinstance(found, str) or not FAIRNESS_KEY.match(found):
            raise SpecError(
                f"concurrency.key_from: {self.key_from!r} gives {_shown(found)}, "
                f"not a key ({KEY_RULE})"
            )
        return found


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
