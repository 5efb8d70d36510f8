"""Guardrails the end-to-end tests load into `agentq worker --tools`."""

from __future__ import annotations

from agentq import GuardCheck, guardrail


@guardrail
def no_secrets(check: GuardCheck) -> str | None:
    """The input may not carry an API key."""
    said = " ".join(str(m.content) for m in check.value)
    return "the input carries an API key" if "sk-" in said else None


@guardrail
def no_refunds(check: GuardCheck) -> str | None:
    """The answer may not promise a refund."""
    return "promises a refund" if "refund" in str(check.value) else None


@guardrail
def small_sums(check: GuardCheck) -> str | None:
    """A call of `add` may not add up past 100."""
    return "too large" if check.value["a"] + check.value["b"] > 100 else None


@guardrail
def not_thirteen(check: GuardCheck) -> str | None:
    """No tool may answer 13."""
    return "an unlucky number" if check.value == 13 else None
