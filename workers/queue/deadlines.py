"""The deadlines of a worker's running jobs, on one event-loop timer.

A job's deadline is a backstop (arq's function timeout: hours), so it almost never
passes. A timer per job (`loop.call_at`, cancelled when the job ends) left each job's
cancelled handle on the event loop's heap until the loop purged it, and every push and
pop on that heap compares handles in Python: the read deadlines of every round trip paid
for the jobs' backstops. Here a job's deadline is an entry in a dict, added when it
starts and removed when it ends, and one timer stands at the earliest deadline any
running job had when it was armed: every running job's deadline is at or after it. When
it fires, the jobs whose deadline passed are cancelled, marked as expired, and it is
armed again at the earliest deadline left. Jobs with the same timeout start in the order
of their deadlines, so the timer is armed again only when it fires.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any


class Deadline:
    """One running job's deadline; `expired`: it passed, and cancelled the job's task."""

    __slots__ = ("expired", "task", "when")

    def __init__(self, when: float, task: asyncio.Task[Any]) -> None:
        self.when = when
        self.task = task
        self.expired = False


class Deadlines:
    """A worker's running jobs' deadlines (`add` when a job starts, `remove` when it ends)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._running: dict[Deadline, None] = {}  # insertion-ordered: oldest first
        self._timer: asyncio.TimerHandle | None = None
        self._at = math.inf  # when the timer fires (inf: no timer)

    def __len__(self) -> int:
        return len(self._running)

    def add(self, task: asyncio.Task[Any], timeout_s: float) -> Deadline:
        """`task`'s deadline, `timeout_s` from now: cancelled then unless removed."""
        deadline = Deadline(self.loop.time() + timeout_s, task)
        self._running[deadline] = None
        if deadline.when < self._at:
            self._arm(deadline.when)
        return deadline

    def remove(self, deadline: Deadline) -> None:
        """The job ended: its deadline no longer applies (the timer stays: when it fires
        it finds nothing due, and is armed again only for the jobs still running)."""
        self._running.pop(deadline, None)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_at(when, self._fire, when)
        self._at = when

    def _fire(self, when: float) -> None:
        self._timer, self._at = None, math.inf
        # The loop runs a timer up to its clock's resolution early.
        now = max(when, self.loop.time())
        due = [d for d in self._running if d.when <= now]
        for deadline in due:
            del self._running[deadline]
            deadline.expired = True
            deadline.task.cancel()
        if self._running:
            self._arm(min(d.when for d in self._running))
