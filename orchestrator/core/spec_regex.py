"""Regular expressions a spec carries: checked when it is read, matched with a timeout.

Python's `re` has no time limit, and a pattern such as `(a|aa)+$` backtracks for
longer than the universe on a line of a's ending in b; so a spec's pattern runs on the
`regex` module (the same syntax) with its `timeout`. Its compiler unrolls counted
repetitions, so `((a{1000}){1000}){1000}` would never finish compiling: the product of
every count in the pattern is capped (counting each `{m,n}` the text holds, nested or
not: a bound the compiler's work stays under).
"""

from __future__ import annotations

from functools import lru_cache

import regex

from agentq.orchestrator.core.expression_limits import (
    EVALUATION_TIMEOUT_S,
    MAX_EXPRESSION_CHARS,
    ExpressionLimitError,
    shown,
)

# The compiler's work grows with the product of the counts (about 1 s per million).
MAX_REPEAT_PRODUCT = 10_000

_COUNT = regex.compile(r"\{(\d*)(?:,(\d*))?\}")


def check_pattern(pattern: str) -> None:
    """Raise ValueError (one line) unless the pattern is one a spec may carry."""
    if len(pattern) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"a pattern is at most {MAX_EXPRESSION_CHARS} characters")
    if repeat_product(pattern) > MAX_REPEAT_PRODUCT:
        raise ValueError(
            f"a pattern's counted repetitions ({{m,n}}) multiply to at most {MAX_REPEAT_PRODUCT:,}"
        )
    try:
        _compiled(pattern)
    except regex.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    except RecursionError:
        raise ValueError("a pattern's groups are nested too deeply") from None


def repeat_product(pattern: str) -> int:
    """The product of every counted repetition's largest count (an open `{m,}`: m)."""
    product = 1
    for low, high in _COUNT.findall(pattern):
        product *= max(int(low or 0), int(high or 0), 1)
        if product > MAX_REPEAT_PRODUCT:
            break
    return product


def search(pattern: str, text: str, timeout_s: float = EVALUATION_TIMEOUT_S) -> bool:
    """Whether the (checked) pattern matches somewhere in `text`; ExpressionLimitError
    when the match runs past `timeout_s`."""
    try:
        return _compiled(pattern).search(text, timeout=timeout_s) is not None
    except TimeoutError:
        raise ExpressionLimitError(
            f"the pattern {shown(pattern)} did not finish matching within {timeout_s:g} s"
        ) from None


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)
