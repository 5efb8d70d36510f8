"""What a bench prints beside a figure and its goal: PASS, MISS, noise or skip.

A `--quick` run takes a few samples on a shared machine: a timed figure from it (a
latency, a rate, a ratio of two) is noise, so it gets no verdict rather than a PASS it
did not earn; a count (round trips, bytes stored) is the same at any size and is judged.
"""

from __future__ import annotations


def verdict(met: bool, *, timed: bool, quick: bool, figure: float = 0.0) -> str:
    """PASS or MISS; "noise" for a timed figure of a --quick run; "skip" for a figure
    that was not measured (nan)."""
    if figure != figure:
        return "skip"
    if timed and quick:
        return "noise"
    return "PASS" if met else "MISS"
