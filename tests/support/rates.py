"""The submit rate's one-minute window (`Runs.count_submission`), for tests that count to
a limit."""

from __future__ import annotations

import time

WINDOW_S = 60


def away_from_the_window_edge() -> None:
    """Counts start afresh each minute: a test that counts to a limit starts far from the
    window's end, so that its counts share one window."""
    into = time.time() % WINDOW_S
    if into > WINDOW_S - 15:
        time.sleep(WINDOW_S - into + 0.1)
