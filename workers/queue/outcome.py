"""How a job ended, as the people who watch a fleet mean it, not as arq sees it: a tool
call whose tool raised returned normally, yet it is a tool error, and a model step that
failed its run is a failure.

The job's code reports what it learns (`report`) wherever it learns it; the worker's
metrics (`instrument`) open a report around each job (`reporting`) and read it with what
the job function raised. A context variable carries it, so no signature changes for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum


class JobOutcome(StrEnum):
    SUCCEEDED = "succeeded"  # it did its work: the model answered, the tool returned
    TOOL_ERROR = "tool_error"  # a tool call ended in an error result the model sees
    FAILED = "failed"  # it failed its run, or raised
    CANCELLED = "cancelled"  # stopped: its run or call was cancelled
    RELEASED = "released"  # given back to run again (Redis trouble, a tool it lacks)


# The worst reported wins: a step that saw a tool error and then failed its run failed.
_SEVERITY = (JobOutcome.SUCCEEDED, JobOutcome.TOOL_ERROR, JobOutcome.FAILED)

_REPORT: ContextVar[list[JobOutcome] | None] = ContextVar("agentq_job_outcome", default=None)


@contextmanager
def reporting() -> Iterator[list[JobOutcome]]:
    """Collect what the job run inside reports."""
    reported: list[JobOutcome] = []
    token = _REPORT.set(reported)
    try:
        yield reported
    finally:
        _REPORT.reset(token)


def report(outcome: JobOutcome) -> None:
    """Say how the current job is ending (nothing outside a job)."""
    reported = _REPORT.get()
    if reported is not None:
        reported.append(outcome)


def returned(reported: list[JobOutcome]) -> JobOutcome:
    """The outcome of a job function that returned, from what it reported."""
    return max(reported, key=_SEVERITY.index, default=JobOutcome.SUCCEEDED)
