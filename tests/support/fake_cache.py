"""Prompt-cache rules for the provider fakes: what a request reads from and writes to the
provider's cache, as the providers document it, so a test (or bench/caching.py) sees the
usage a real API would report for the same sequence of requests.

Tokens are counted as one per 4 characters of the request's JSON (no tokenizer here): the
rules only need prefixes and lengths to be consistent between requests.

Anthropic (https://docs.claude.com/en/docs/build-with-claude/prompt-caching):

- the prefix is tools, then system, then messages; `cache_control` on a block caches the
  prefix up to and including it;
- "You can define up to 4 cache breakpoints": a 5th is refused with 400
  `invalid_request_error`, "A maximum of 4 blocks with cache_control may be provided.
  Found 5." (`AnthropicCache.refusal`, applied by the fake on every request);
- minimum cacheable prompt length 1,024 tokens (Opus 4.x, Sonnet 4.x; 4,096 for Opus 4.5
  and Haiku 4.5, 2,048 for Haiku 3.x); a shorter marked prefix is not cached, and no error;
- the cache "has a 5-minute lifetime, refreshed for no additional cost each time the cached
  content is used", or 1 hour with `"ttl": "1h"`;
- at each breakpoint the system checks for a hit at earlier block boundaries, "about 20
  blocks" back; the longest hit is read (`cache_read_input_tokens`), the prefix up to the
  furthest breakpoint past it is written (`cache_creation_input_tokens`), and
  `input_tokens` is what follows the last breakpoint or was not cached.

OpenAI (https://platform.openai.com/docs/guides/prompt-caching):

- automatic, for prompts of 1,024 tokens or more; `cached_tokens` is 0 below that;
- exact prefix matches only, reported "in increments of 128 tokens" past the first 1,024;
- requests are routed by a hash of the prompt's start combined with `prompt_cache_key`,
  so a key keeps a run's requests on the machine that holds its prefix (this fake is one
  machine per key; it does not model the overflow past ~15 requests a minute);
- cached prefixes stay 5 to 10 minutes after their last use (here: 5).

Both take an injectable clock (`Clock`), so a TTL is tested without waiting.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

CHARS_PER_TOKEN = 4
ANTHROPIC_MAX_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK_BLOCKS = 20
TTL_S = {"5m": 300.0, "1h": 3600.0}
OPENAI_MIN_TOKENS = 1024
OPENAI_INCREMENT = 128
OPENAI_RETENTION_S = 300.0


def tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class Clock:
    """Seconds, moved by the test: `clock.advance(301)` outlives a 5-minute cache."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class _Block:
    text: str  # the block as the cache sees it: without its cache_control
    ttl: str | None  # the breakpoint's TTL, when the block carries one


def anthropic_blocks(body: dict[str, Any]) -> list[_Block]:
    """The request's prefix, block by block: tools, system, then each message's blocks."""

    def block(value: Any, role: str = "") -> _Block:
        if not isinstance(value, dict):
            return _Block(json.dumps([role, value]), None)
        mark = value.get("cache_control")
        rest = {k: v for k, v in value.items() if k != "cache_control"}
        ttl = str(mark.get("ttl", "5m")) if isinstance(mark, dict) else None
        return _Block(json.dumps([role, rest]), ttl)

    out = [block(t, "tool") for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, list):
        out += [block(b, "system") for b in system]
    elif system:
        out.append(block(system, "system"))
    for message in body.get("messages") or []:
        role, content = str(message.get("role")), message.get("content")
        out += (
            [block(b, role) for b in content]
            if isinstance(content, list)
            else [block(content, role)]
        )
    return out


@dataclass
class AnthropicCache:
    """One Anthropic organisation's prompt cache, for one model at a time."""

    min_tokens: int = 1024
    clock: Clock = field(default_factory=Clock)
    # prefix digest -> (expires at, TTL in seconds)
    entries: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def refusal(body: dict[str, Any]) -> str | None:
        """The API's error for a request with too many breakpoints, or None."""
        found = sum(b.ttl is not None for b in anthropic_blocks(body))
        if found <= ANTHROPIC_MAX_BREAKPOINTS:
            return None
        return (
            f"A maximum of {ANTHROPIC_MAX_BREAKPOINTS} blocks with cache_control may be "
            f"provided. Found {found}."
        )

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """The input side of the response's usage: reads, writes and the rest."""
        blocks = anthropic_blocks(body)
        digests, ends = list(_prefix_digests(str(body.get("model")), blocks)), []
        total = 0
        for b in blocks:
            total += tokens(b.text)
            ends.append(total)
        marks = [i for i, b in enumerate(blocks) if b.ttl is not None]
        with self._lock:
            now = self.clock()
            self.entries = {d: e for d, e in self.entries.items() if e[0] > now}
            read = self._longest_hit(digests, marks)
            if read >= 0:
                _, ttl_s = self.entries[digests[read]]
                self.entries[digests[read]] = (now + ttl_s, ttl_s)
            read_tokens = ends[read] if read >= 0 else 0
            written = -1
            for i in marks:
                if i > read and ends[i] >= self.min_tokens:
                    ttl_s = TTL_S[blocks[i].ttl or "5m"]
                    self.entries[digests[i]] = (now + ttl_s, ttl_s)
                    written = i
        write_tokens = ends[written] - read_tokens if written >= 0 else 0
        return {
            "input_tokens": total - read_tokens - write_tokens,
            "cache_read_input_tokens": read_tokens,
            "cache_creation_input_tokens": write_tokens,
        }

    def _longest_hit(self, digests: list[str], marks: list[int]) -> int:
        best = -1
        for mark in marks:
            for i in range(mark, max(-1, mark - ANTHROPIC_LOOKBACK_BLOCKS), -1):
                if digests[i] in self.entries:
                    best = max(best, i)
                    break
        return best


def _prefix_digests(model: str, blocks: list[_Block]) -> Iterator[str]:
    """The digest of every prefix (up to and including block i): caches are per model."""
    digest = hashlib.sha256(model.encode())
    for b in blocks:
        digest.update(b.text.encode())
        yield digest.copy().hexdigest()


def openai_prompt(body: dict[str, Any]) -> str:
    """A Chat Completions or Responses request's prompt, in the order the model reads it:
    tools, instructions, then the messages (or input items). Byte for byte as sent, so a
    key order or spacing that changes between requests breaks the prefix, as it would."""
    parts = [json.dumps(body.get("tools") or [])]
    if "instructions" in body:
        parts.append(json.dumps(body["instructions"]))
    items = body.get("messages") if "messages" in body else body.get("input")
    if isinstance(items, str):
        items = [items]
    parts += [json.dumps(item) for item in items or []]
    return "".join(parts)


@dataclass
class OpenAICache:
    """OpenAI's automatic prompt cache: one machine per routing key."""

    clock: Clock = field(default_factory=Clock)
    # routing key -> prompts seen, with when each expires
    seen: dict[str, dict[str, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cached_tokens(self, body: dict[str, Any]) -> tuple[int, int]:
        """(prompt tokens, cached tokens) for the request, which is then cached in turn."""
        prompt = openai_prompt(body)
        total = tokens(prompt)
        key = str(body.get("prompt_cache_key") or "") + "|" + str(body.get("model"))
        with self._lock:
            now = self.clock()
            machine = {p: t for p, t in self.seen.get(key, {}).items() if t > now}
            common = max((_common_prefix(prompt, p) for p in machine), default=0)
            matched = common // CHARS_PER_TOKEN
            cached = 0
            if total >= OPENAI_MIN_TOKENS and matched >= OPENAI_MIN_TOKENS:
                cached = matched - (matched - OPENAI_MIN_TOKENS) % OPENAI_INCREMENT
            if cached:
                for p in machine:
                    if _common_prefix(prompt, p) == common:
                        machine[p] = now + OPENAI_RETENTION_S
            machine[prompt] = now + OPENAI_RETENTION_S
            self.seen[key] = machine
        return total, cached


def _common_prefix(a: str, b: str) -> int:
    size = min(len(a), len(b))
    if a[:size] == b[:size]:
        return size
    low, high = 0, size  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low
