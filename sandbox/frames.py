"""A byte buffer that length-prefixed frames are read from, chunk in, frame out.

Both framings the host reads (Docker's multiplexed exec stream and the sandbox
driver's own frames) use it. It reads at an offset and compacts once per `feed`,
so a chunk of many tiny frames costs time linear in its size (deleting from the
front per frame was quadratic: a flood of empty frames froze the event loop).
"""

from __future__ import annotations


class FrameBuffer:
    def __init__(self) -> None:
        self._data = bytearray()
        self._offset = 0

    @property
    def pending(self) -> int:
        """Bytes received and not yet taken."""
        return len(self._data) - self._offset

    def feed(self, chunk: bytes) -> None:
        if self._offset:
            del self._data[: self._offset]
            self._offset = 0
        self._data += chunk

    def peek(self, size: int) -> bytes:
        """The next `size` bytes, not taken (the caller checked `pending`)."""
        return bytes(self._data[self._offset : self._offset + size])

    def take_frame(self, header_size: int, payload_size: int) -> bytes | None:
        """The payload of the frame at the front, taken; None until all of it is here."""
        start = self._offset + header_size
        end = start + payload_size
        if len(self._data) < end:
            return None
        self._offset = end
        return bytes(self._data[start:end])
