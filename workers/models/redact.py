"""Scrubbing secrets from text that leaves a worker (errors stored in runs, logs).

A server may echo a key whole, cut (`sk-SECRET-CANA**`), URL-encoded or in
base64 (an `Authorization: Basic` header, a debug dump). Every run of at least
`MIN_ECHO` characters of the key is replaced, and so are its encoded forms.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from urllib.parse import quote

from agentq.orchestrator.core.errors import ProviderError

REDACTED = "[redacted]"
# Shorter runs of a key are too likely to be ordinary text.
MIN_ECHO = 6


def _echoes(secret: str) -> list[str]:
    """The encoded forms of the secret worth looking for, longest first."""
    forms = {quote(secret, safe=""), quote(secret)}
    raw = secret.encode()
    for offset in range(3):
        # base64 of the key inside a longer value: only the characters that depend on
        # the key's bytes alone are stable, whatever precedes it.
        padded = b"\0" * offset + raw
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(padded).decode().rstrip("=")
            start = -(-offset * 4 // 3) + (1 if offset else 0)
            stable = len(raw) * 4 // 3 - 2
            run = text[start : start + stable]
            if len(run) >= MIN_ECHO:
                forms.add(run)
    return sorted((f for f in forms if f and f != secret), key=len, reverse=True)


def _runs(text: str, secret: str) -> list[tuple[int, int]]:
    """Spans of `text` that are substrings of `secret`, MIN_ECHO characters or longer."""
    size = min(MIN_ECHO, len(secret))
    pieces = {secret[i : i + size] for i in range(len(secret) - size + 1)}
    spans: list[tuple[int, int]] = []
    i = 0
    while i + size <= len(text):
        if text[i : i + size] not in pieces:
            i += 1
            continue
        end = i + size
        while end < len(text) and text[i : end + 1] in secret:
            end += 1
        spans.append((i, end))
        i = end
    return spans


def redact(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if not secret or len(secret) < 4:
            continue
        text = text.replace(secret, REDACTED)
        for form in _echoes(secret):
            text = re.sub(
                r"[A-Za-z0-9+/_-]{0,3}" + re.escape(form) + r"[A-Za-z0-9+/_=-]{0,4}", REDACTED, text
            )
        for start, end in reversed(_runs(text, secret)):
            text = text[:start] + REDACTED + text[end:]
    return text


@contextmanager
def key_scrubbed(key: str | None) -> Iterator[None]:
    """A `ProviderError` raised inside whose message echoes `key` is raised again with the
    key scrubbed (same status, retryability and Retry-After): its message is stored in
    the run and logged."""
    try:
        yield
    except ProviderError as exc:
        message = redact(exc.message, (key,))
        if message == exc.message:
            raise
        raise ProviderError(
            message, status=exc.status, retryable=exc.retryable, retry_after_s=exc.retry_after_s
        ) from None
