"""Counting the calls of given functions while a block runs (a path a test says is
taken, or skipped, as a count rather than a time)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


@contextmanager
def calls_to(*functions: Any) -> Iterator[dict[str, int]]:
    """How many times each function is entered while the block runs (this thread)."""
    codes = {f.__code__: f.__qualname__ for f in functions}
    counts = dict.fromkeys(codes.values(), 0)

    def profile(frame: FrameType, event: str, arg: object) -> None:
        name = codes.get(frame.f_code)
        if event == "call" and name is not None:
            counts[name] += 1

    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)
