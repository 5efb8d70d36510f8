"""JMESPath a spec carries (`needs_approval` rules, workflow conditions), evaluated
within a deadline and a size budget.

JMESPath has no loops, but it can copy: `[@,@]` doubles a value in three steps, so a
500-character expression builds a structure of 2^100 references, and one `to_string`,
`==` or `join` on it never returns. The interpreter here checks the deadline before
every node it visits and refuses any value a node returns that is larger (as a tree:
shared references counted each time) than the budget, so no single node can do more
than the budget's work and no sequence of nodes runs past the deadline. `join` checks
its result's length before building it (a long separator over a long list).
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import jmespath
from jmespath import functions
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult
from jmespath.visitor import Options, TreeInterpreter

if TYPE_CHECKING:
    from jmespath.visitor import _TreeNode

from agentq.orchestrator.core.expression_limits import (
    EVALUATION_TIMEOUT_S,
    MAX_EXPRESSION_CHARS,
    ExpressionLimitError,
    shown,
)

# Nodes plus string characters of any value a node may return: far above what a condition
# over a tool's input needs (that input is itself capped), far below a stuck worker.
MAX_VALUE_UNITS = 1_000_000


def check_expression(expression: str) -> None:
    """Raise ValueError (one line) unless the expression is one a spec may carry."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"an expression is at most {MAX_EXPRESSION_CHARS} characters")
    try:
        _compiled(expression)
    except JMESPathError as exc:
        raise ValueError(f"not a valid JMESPath expression: {_one_line(exc)}") from None
    except RecursionError:
        raise ValueError("an expression is nested too deeply") from None


def search(expression: str, value: Any, timeout_s: float = EVALUATION_TIMEOUT_S) -> Any:
    """The (checked) expression over `value`; ExpressionLimitError past the deadline or
    the size budget."""
    budget = max(MAX_VALUE_UNITS, _units(value, None))
    interpreter = _Bounded(expression, time.monotonic() + timeout_s, budget, timeout_s)
    return interpreter.visit(_compiled(expression).parsed, value)


def truthy(value: Any) -> bool:
    """JMESPath truthiness: false, null, "", [] and {} are false."""
    if value is None or value is False:
        return False
    return not (isinstance(value, str | list | dict) and len(value) == 0)


class _Functions(functions.Functions):
    @functions.signature({"types": ["string"]}, {"types": ["array-string"]})
    def _func_join(self, separator: str, array: list[str]) -> str:
        size = len(separator) * max(len(array) - 1, 0) + sum(len(s) for s in array)
        if size > MAX_VALUE_UNITS:
            raise ExpressionLimitError(
                f"join would build {size:,} characters (at most {MAX_VALUE_UNITS:,})"
            )
        return separator.join(array)


_OPTIONS = Options(custom_functions=_Functions())


class _Bounded(TreeInterpreter):
    def __init__(self, expression: str, deadline: float, budget: int, timeout_s: float) -> None:
        super().__init__(_OPTIONS)
        self._shown = shown(expression)
        self._deadline = deadline
        self._budget = budget
        self._timeout_s = timeout_s

    def visit(self, node: _TreeNode, *args: Any, **kwargs: Any) -> Any:
        if time.monotonic() > self._deadline:
            raise ExpressionLimitError(
                f"the expression {self._shown} did not finish within {self._timeout_s:g} s"
            )
        result = super().visit(node, *args, **kwargs)
        if _units(result, self._budget) > self._budget:
            raise ExpressionLimitError(
                f"the expression {self._shown} built a value over {self._budget:,} units"
            )
        return result


def _units(value: Any, limit: int | None) -> int:
    """The value's size as a tree (each node 1, each string its length), counting up to
    just past `limit` (None: all of it)."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            total += 1 + len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            total += 1
            stack.extend(item)
        elif isinstance(item, str):
            total += 1 + len(item)
        else:
            total += 1
        if limit is not None and total > limit:
            return total
    return total


def _one_line(exc: JMESPathError) -> str:
    """jmespath's message is the expression drawn over lines; its first line and where."""
    first = str(exc).splitlines()[0].rstrip(":")
    where = getattr(exc, "lex_position", None)
    return first if where is None else f"{first} at position {where}"


@lru_cache(maxsize=256)
def _compiled(expression: str) -> ParsedResult:
    return jmespath.compile(expression)
