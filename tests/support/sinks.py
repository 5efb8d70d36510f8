"""Test helpers shared by provider tests."""

from __future__ import annotations


class ListSink:
    """A DeltaSink that keeps the deltas."""

    def __init__(self) -> None:
        self.deltas: list[str] = []

    async def text_delta(self, delta: str) -> None:
        self.deltas.append(delta)

    @property
    def text(self) -> str:
        return "".join(self.deltas)
