"""HMAC-SHA256 signatures of what agentq POSTs to a receiver (push webhooks of remote
queues, a run's event webhooks), and their check, in one place.

The scheme, for receivers: with `t` the `X-Agentq-Timestamp` header (unix seconds) and
`body` the raw request body, `X-Agentq-Signature` is `v1=` + the hex HMAC-SHA256 of
`t + "." + body` under the shared secret. A receiver recomputes it, compares in
constant time, and refuses a timestamp too far from its own clock (a replay).
"""

from __future__ import annotations

import hashlib
import hmac
import time

TIMESTAMP_HEADER = "X-Agentq-Timestamp"
SIGNATURE_HEADER = "X-Agentq-Signature"
VERSION = "v1"
# How far a receiver may trust a timestamp from its own clock.
DEFAULT_TOLERANCE_S = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"{VERSION}={mac.hexdigest()}"


def signed_headers(secret: str, body: bytes, now_s: float | None = None) -> dict[str, str]:
    """The headers that sign `body` now."""
    timestamp = int(time.time() if now_s is None else now_s)
    return {
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, body),
    }


def verify(
    secret: str,
    timestamp: str,
    body: bytes,
    signed: str,
    *,
    now_s: float | None = None,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> bool:
    """Whether `signed` signs `body` at `timestamp`, within `tolerance_s` of now.

    Headers are untrusted text: a timestamp is ASCII digits only (`int()` would also take
    `+T`, ` T `, `1_0` or other scripts' digits, each a second spelling of one signed
    value), and a non-ASCII signature is simply wrong (`compare_digest` raises
    TypeError on non-ASCII text, so the comparison is on bytes)."""
    if not (timestamp.isascii() and timestamp.isdigit()):
        return False
    moment = int(timestamp)
    now = time.time() if now_s is None else now_s
    if abs(now - moment) > tolerance_s:
        return False
    expected = signature(secret, moment, body).encode()
    return hmac.compare_digest(expected, signed.encode("utf-8", "surrogatepass"))
