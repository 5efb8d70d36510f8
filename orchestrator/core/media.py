"""Media in tool outputs: find it, cap it, and describe it for models that cannot see it.

A tool output carries media as parts `{"type": "media", "media_type", "data"}` (base64)
either in `{"content": [parts]}` (MCP results, function tools that return parts) or in
`{"artifacts": [...]}` (the code tool's files). `tool_content` turns such an output into
an ordered list of text and `Media` items that a wire format renders: as images where
the API accepts images in tool results, else as `Media.describe()` text, a description
and a reference (`call_0_1#0`), never the base64 itself; `text_and_media` serves the
APIs that take media beside a text result (Chat Completions in a following user
message, Gemini in the function response turn). Media over the caps is
replaced by a note. Data only, pure.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentq.orchestrator.core.messages import tool_output_text

MB = 1024 * 1024


@dataclass(frozen=True)
class MediaLimits:
    """Caps on the media of one tool result, in decoded bytes. Configurable per model with
    `options.media: {"max_item_bytes": ..., "max_total_bytes": ...}`."""

    max_item_bytes: int = 5 * MB
    max_total_bytes: int = 20 * MB

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> MediaLimits:
        raw = options.get("media") or {}
        default = cls()
        return cls(
            max_item_bytes=int(raw.get("max_item_bytes", default.max_item_bytes)),
            max_total_bytes=int(raw.get("max_total_bytes", default.max_total_bytes)),
        )


@dataclass(frozen=True)
class Media:
    ref: str
    media_type: str
    data: str  # base64
    size_bytes: int

    @property
    def is_image(self) -> bool:
        return self.media_type.startswith("image/")

    @property
    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"

    def describe(self) -> str:
        return (
            f"[{_kind(self.media_type)}: {self.media_type}, {_size(self.size_bytes)}, {self.ref}]"
        )


ContentItem = str | Media


def _kind(media_type: str) -> str:
    return media_type.split("/", 1)[0] or "media"


def _size(size_bytes: int) -> str:
    if size_bytes >= MB:
        return f"{size_bytes / MB:.1f} MB"
    return f"{max(1, round(size_bytes / 1024))} kB"


def decoded_size(data: str) -> int:
    """Bytes the base64 text decodes to (without decoding it)."""
    stripped = data.strip().rstrip("=")
    return len(stripped) * 3 // 4


def is_media_part(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") == "media"
        and isinstance(value.get("media_type"), str)
        and isinstance(value.get("data"), str)
    )


def has_media(output: Any) -> bool:
    if not isinstance(output, dict):
        return False
    return any(
        is_media_part(p)
        for key in ("content", "artifacts")
        if isinstance(output.get(key), list)
        for p in output[key]
    )


class _Budget:
    def __init__(self, call_id: str, limits: MediaLimits) -> None:
        self.call_id = call_id
        self.limits = limits
        self.count = 0
        self.total = 0

    def take(self, part: dict[str, Any]) -> ContentItem:
        ref = f"{self.call_id}#{self.count}"
        self.count += 1
        media_type, data = str(part["media_type"]), str(part["data"])
        size = decoded_size(data)
        if not _valid_base64(data):
            return f"[{_kind(media_type)} omitted: {media_type}, not valid base64, {ref}]"
        if size > self.limits.max_item_bytes:
            cap = _size(self.limits.max_item_bytes)
            return (
                f"[{_kind(media_type)} omitted: {media_type}, {_size(size)} "
                f"over the {cap} cap, {ref}]"
            )
        if self.total + size > self.limits.max_total_bytes:
            cap = _size(self.limits.max_total_bytes)
            return (
                f"[{_kind(media_type)} omitted: {media_type}, {_size(size)}, the result's media "
                f"would exceed {cap}, {ref}]"
            )
        self.total += size
        return Media(ref=ref, media_type=media_type, data=data, size_bytes=size)


def _valid_base64(data: str) -> bool:
    try:
        base64.b64decode(data[:4096] + "=" * (-len(data[:4096]) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def tool_content(output: Any, call_id: str, limits: MediaLimits | None = None) -> list[ContentItem]:
    """The output as text and media items, in order. Without media: one text item, the
    output exactly as `tool_output_text` shows it."""
    if not has_media(output):
        return [tool_output_text(output)]
    budget = _Budget(call_id, limits or MediaLimits())
    items: list[ContentItem] = []
    rest = dict(output)
    content = rest.pop("content", None)
    artifacts = rest.pop("artifacts", None)
    if isinstance(content, list):
        for part in content:
            if is_media_part(part):
                items.append(budget.take(part))
            elif isinstance(part, dict) and part.get("type") == "text":
                items.append(str(part.get("text", "")))
            else:
                items.append(tool_output_text(part))
    elif content is not None:
        rest["content"] = content
    if isinstance(artifacts, list):
        refs: list[Any] = []
        for part in artifacts:
            if is_media_part(part):
                ref = f"{budget.call_id}#{budget.count}"
                items.append(budget.take(part))
                meta = {k: v for k, v in part.items() if k not in ("data", "type")}
                refs.append({**meta, "ref": ref})
            else:
                refs.append(part)
        rest["artifacts"] = refs
    if rest:
        # The rest of the output (the code tool's stdout, a structured result) leads.
        items.insert(0, json.dumps(rest, ensure_ascii=False, default=str))
    return _merge_text(items)


def _merge_text(items: list[ContentItem]) -> list[ContentItem]:
    merged: list[ContentItem] = []
    for item in items:
        if isinstance(item, str) and merged and isinstance(merged[-1], str):
            merged[-1] = f"{merged[-1]}\n{item}"
        elif item != "":
            merged.append(item)
    return merged


def as_text(items: list[ContentItem]) -> str:
    """For models that get no media in tool results: media as description and reference."""
    return "\n".join(i if isinstance(i, str) else i.describe() for i in items)


def result_text(output: Any, call_id: str, limits: MediaLimits | None = None) -> str:
    """A tool output as text for a model that takes no media in tool results."""
    return as_text(tool_content(output, call_id, limits))


def text_and_media(
    output: Any, call_id: str, accepts: Callable[[Media], bool], limits: MediaLimits | None = None
) -> tuple[str, list[Media]]:
    """For wire formats whose tool results are text but whose turns take media beside
    them (Chat Completions, Gemini): the result as text, each media item described in its
    place (so its reference ties it to what follows), and the media `accepts` lets go."""
    items = tool_content(output, call_id, limits)
    return as_text(items), [i for i in items if isinstance(i, Media) and accepts(i)]
