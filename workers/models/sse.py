"""Server-sent events, parsed line by line as the WHATWG spec describes.

Shared by every provider: OpenAI ends with `data: [DONE]`, Anthropic names its
events with `event:`, Gemini sends bare `data:` lines. The parser is pure (feed
lines, get events) so its edge cases are unit-tested without a server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None


class SSEDecoder:
    """Feed it lines without their line terminator; it returns an event at each blank line."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, line: str) -> SSEEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment, e.g. a keep-alive
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        # "retry" and unknown fields are ignored, as the spec says.
        return None

    def flush(self) -> SSEEvent | None:
        """At the end of the stream: an event not followed by a blank line still counts
        (several OpenAI-compatible servers omit the final blank line)."""
        return self._dispatch()

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SSEEvent(data="\n".join(self._data), event=self._event or "message", id=self._id)
        self._data = []
        self._event = ""
        return event


def parse_lines(lines: Iterable[str]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for line in lines if (e := decoder.feed(line)) is not None]
    last = decoder.flush()
    return [*events, last] if last is not None else events


async def iter_sse(response: httpx.Response) -> AsyncIterator[SSEEvent]:
    decoder = SSEDecoder()
    # aiter_lines splits on \n, \r\n and \r, which is exactly the SSE line grammar.
    async for line in response.aiter_lines():
        event = decoder.feed(line)
        if event is not None:
            yield event
    last = decoder.flush()
    if last is not None:
        yield last
