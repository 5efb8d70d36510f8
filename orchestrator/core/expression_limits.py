"""What a spec's own expressions may cost: its `has_text_matching` patterns and its
JMESPath (`needs_approval` rules, workflow conditions).

A run spec is untrusted input (DESIGN.md: trust boundary) and these expressions run in
workers, so each is bounded: in length when the spec is read, in time (and, for
JMESPath, in the size of what it builds) when it is evaluated. An evaluation past its
bound raises ExpressionLimitError, which the caller turns into a typed failure (the
run fails `limit`, a workflow node fails) instead of a worker pinned on one job.
"""

from __future__ import annotations

# Long enough for any pattern or condition a person writes; what a spec can carry.
MAX_EXPRESSION_CHARS = 500

# One evaluation's time: a sane pattern or condition takes microseconds, so this only
# ever stops a hostile one (and is far below a step's deadline).
EVALUATION_TIMEOUT_S = 0.25


class ExpressionLimitError(Exception):
    """A spec's expression ran past its bound; `message` names it and the bound."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def shown(expression: str, width: int = 60) -> str:
    """The expression as an error names it: quoted, cut to `width` characters."""
    return repr(expression if len(expression) <= width else expression[:width] + "…")
