"""What kind of failure a tool error is, carried on the result, its `tool-error` event
and the AI SDK stream, so a caller can tell a model's bad call from a tool that broke
without parsing the message the model reads; and what a tool error does to its run."""

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


class OnError(StrEnum):
    """A tool's `on_error`: where its calls' errors go."""

    MODEL = "model"  # back to the model as the call's result; the run goes on
    FAIL_RUN = "fail-run"  # the run ends failed (a `tool` failure naming the call)
