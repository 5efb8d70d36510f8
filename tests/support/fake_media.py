"""Media in the requests the provider fakes receive: checked as the APIs check it, and
echoed so a test can see that a model was really shown it.

Each fake finds the media where its API puts it (Chat Completions: `image_url` parts of
user messages; Gemini: `inlineData` parts) and hands each one here as its media type and
base64 data. Bad base64 is refused with a 400, as the APIs refuse an unreadable image;
a turn with `echo_media` appends one line per medium to its text, what the model "saw":

    saw image/png (67 bytes, sha256 1a2b3c4d5e6f)
"""

from __future__ import annotations

import base64
import binascii
import hashlib

DATA_URL_PREFIX = "data:"


def seen(media_type: str, data: str) -> str:
    """The echo line for one medium; ValueError when `data` is not base64."""
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error:
        raise ValueError(f"invalid base64 data for {media_type}") from None
    digest = hashlib.sha256(raw).hexdigest()[:12]
    return f"saw {media_type} ({len(raw)} bytes, sha256 {digest})"


def seen_data_url(url: str) -> str | None:
    """The echo line for a `data:` URL (None for an http URL: nothing inline to check);
    ValueError when it is malformed."""
    if not url.startswith(DATA_URL_PREFIX):
        if url.startswith(("http://", "https://")):
            return None
        raise ValueError("image_url.url must be an http(s) URL or a base64 data URL")
    header, sep, data = url[len(DATA_URL_PREFIX) :].partition(",")
    media_type, _, encoding = header.partition(";")
    if not sep or encoding != "base64":
        raise ValueError("a data URL must be data:<media type>;base64,<data>")
    return seen(media_type, data)


def echoed(text: str, lines: list[str]) -> str:
    """A turn's text with the echo lines after it."""
    return "\n".join([text, *lines]) if text else "\n".join(lines)
