"""Something opened by `start` and closed by `aclose`, usable as `async with`."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncResource:
    """`async with resource:` starts it and closes it, whatever happened inside."""

    async def start(self) -> None:
        """Open what the resource holds; nothing by default."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
