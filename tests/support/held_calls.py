"""Keyed runs whose one call is held at a gate: each call (tests/support/sample_tools.py:
enter_hold_leave) logs `+tag` as it starts, waits until its key's gate file exists, and
logs `-tag` as it ends, so the marker file shows which calls ran at once, in order."""

from __future__ import annotations

from pathlib import Path

from tests.support.specs import calls, scripted


def held_spec(tmp: Path, tag: str, key: str, max_running: int) -> dict[str, object]:
    args = {"marker": str(tmp / "marker"), "tag": tag, "gate": str(tmp / f"gate-{key}")}
    return scripted(
        calls(("enter_hold_leave", args)),
        {"text": "done"},
        tools=["enter_hold_leave"],
        concurrency={"key": key, "max": max_running},
    )


def marker_lines(tmp: Path) -> list[str]:
    marker = tmp / "marker"
    return marker.read_text().split() if marker.exists() else []


def most_at_once(lines: list[str], prefix: str) -> int:
    """The most calls of tags starting with `prefix` between their + and - at once."""
    running, most = 0, 0
    for line in lines:
        if line[1:].startswith(prefix):
            running += 1 if line[0] == "+" else -1
            most = max(most, running)
    return most
