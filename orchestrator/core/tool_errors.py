"""What kind of failure a tool error is, carried on the result, its `tool-error` event
and the AI SDK stream, so a caller (or a spec's `on_error`) can tell a model's bad call
from a tool that broke without parsing the message the model reads."""

from __future__ import annotations

from enum import StrEnum


class ToolErrorKind(StrEnum):
    NO_SUCH_TOOL = "no-such-tool"  # the model called a tool the run does not offer
    INVALID_INPUT = "invalid-input"  # unparseable arguments, or a schema violation
    EXECUTION = "execution"  # the tool ran and failed (raised, crashed, reported an error)
    TIMEOUT = "timeout"  # past its deadline, running or parked (approval, outside result)
    DENIED = "denied"  # an approver said no
    CANCELLED = "cancelled"  # stopped before it answered (a cancel, a final answer first)
    OUTPUT_TOO_LARGE = "output-too-large"  # an output that cannot be cut to fit a limit
