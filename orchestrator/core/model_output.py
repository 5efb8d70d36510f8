"""What a `to_model_output` hook may answer, made the one shape the wire formats read (pure).

A tool's hook converts its output into what the model sees, while the run records the
output as it was (`ToolResultPart.model_output` beside `output`). It may answer:

- text (a `str`): the model reads it as the result;
- a list of parts, each text (a `str` or `{"type": "text", "text"}`) or media
  (`{"type": "media", "media_type", "data"}`, `data` base64 text or raw `bytes`);
- `{"content": [parts]}`, the shape media-bearing tool outputs already have;
- None: no conversion, the model sees the output itself.

Parts with media become `{"content": [parts]}`, which `media.tool_content` renders on
every wire format; text parts alone become their text, one part a line. Anything else
is a TypeError naming what came back.
"""

from __future__ import annotations

import base64
from typing import Any


def model_output(value: Any) -> Any:
    """The hook's answer as the model's view of the result (None: the output itself)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"content"}:
        value = value["content"]
    if not isinstance(value, list):
        raise TypeError(
            f"returned {type(value).__name__}, not text, a list of text and media parts, or None"
        )
    parts = [_part(p, i) for i, p in enumerate(value)]
    if all(p["type"] == "text" for p in parts):
        # Text alone reads as text on every wire format (a content list would be JSON).
        return "\n".join(p["text"] for p in parts)
    return {"content": parts}


def _part(part: Any, index: int) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text" and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "media" and isinstance(part.get("media_type"), str):
        data = part.get("data")
        if isinstance(data, bytes | bytearray):
            data = base64.b64encode(data).decode("ascii")
        if isinstance(data, str):
            return {"type": "media", "media_type": part["media_type"], "data": data}
    raise TypeError(
        f"part {index} is {part!r:.80}, not text or "
        '{"type": "media", "media_type": ..., "data": ...}'
    )
