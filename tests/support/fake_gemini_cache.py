"""Gemini's context caching as the API documents it, for the Gemini fake
(https://ai.google.dev/gemini-api/docs/caching; tokens counted as in fake_cache.py, one
per 4 characters of JSON).

Implicit (Gemini 2.5 and later, on by default): a request whose prompt (system
instruction, tools, tool config, then contents) repeats a prefix of an earlier request
to the same model, within the retention, has that prefix reported as
`cachedContentTokenCount`; only from the model's minimum size on (1,024 tokens for
Flash, 4,096 for Pro).

Explicit: `POST cachedContents` ({model, systemInstruction?, tools?, toolConfig?,
contents?, ttl "Ns"}) creates a resource named `cachedContents/<id>`, answered with its
`usageMetadata.totalTokenCount` and `expireTime`; under the model's minimum it is refused
(400, "Cached content is too small. total_token_count=…, min_total_token_count=…"). A
request naming it in `cachedContent` must be for the same model and set none of
systemInstruction, tools, toolConfig (400 otherwise); an unknown, deleted or expired one
is 403 "CachedContent not found (or permission denied)". Its tokens are read at the
cached price: `cachedContentTokenCount` is all of them, and `promptTokenCount` counts
them with the request's contents. `DELETE cachedContents/<id>` removes it (403 if unknown).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_cache import CHARS_PER_TOKEN, Clock, _common_prefix, tokens
from tests.support.fake_http import Recorded, Reply

MIN_TOKENS = (("gemini-2.5-pro", 4096), ("gemini-3-pro", 4096), ("gemini-2.5-flash", 1024))
DEFAULT_MIN_TOKENS = 4096
IMPLICIT_RETENTION_S = 300.0
PREFIX_FIELDS = ("systemInstruction", "tools", "toolConfig")
_MODEL = re.compile(r"/models/([^:/]+):")


def min_tokens(model: str) -> int:
    model = model.removeprefix("models/")
    return next((n for prefix, n in MIN_TOKENS if model.startswith(prefix)), DEFAULT_MIN_TOKENS)


def model_of(path: str) -> str:
    found = _MODEL.search(path)
    return found[1] if found else ""


def prefix_text(body: dict[str, Any]) -> str:
    """The part of a request (or a cached content) before its contents, as sent."""
    return "".join(json.dumps(body[f]) for f in PREFIX_FIELDS if f in body)


def contents_text(body: dict[str, Any]) -> str:
    return "".join(json.dumps(c) for c in body.get("contents") or [])


def error(status: int, code: str, message: str) -> Reply:
    return Reply.json({"error": {"code": status, "message": message, "status": code}}, status)


@dataclass
class Resource:
    model: str  # "models/…"
    text: str  # prefix then contents, as the resource holds them
    tokens: int
    expires: float


@dataclass
class GeminiCache:
    clock: Clock = field(default_factory=Clock)
    resources: dict[str, Resource] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    # name -> its tokens, kept after it is deleted or expires (what a test checks usage by)
    resources_created_tokens: dict[str, int] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    # model -> prompts seen, with when each leaves the implicit cache
    seen: dict[str, dict[str, float]] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the cachedContents resource ---------------------------------------------------

    def route(self, request: Recorded) -> Reply | None:
        """The cachedContents endpoints; None for any other request."""
        path = request.path.removeprefix("/v1beta/")
        if request.method == "POST" and path == "cachedContents":
            return self._create(request.body if isinstance(request.body, dict) else {})
        if path.startswith("cachedContents/") and request.method in ("GET", "DELETE"):
            with self._lock:
                resource = self._live(path)
                if resource is None:
                    return error(403, "PERMISSION_DENIED", self.not_found)
                if request.method == "DELETE":
                    del self.resources[path]
                    self.deleted.append(path)
                    return Reply.json({})
                return Reply.json(self._shown(path, resource))
        return None

    not_found = "CachedContent not found (or permission denied)"

    def _create(self, body: dict[str, Any]) -> Reply:
        model = str(body.get("model") or "")
        ttl = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(body.get("ttl", "3600s")))
        if not model.startswith("models/") or ttl is None:
            return error(400, "INVALID_ARGUMENT", "model must be models/… and ttl like '300s'")
        text = prefix_text(body) + contents_text(body)
        count, least = tokens(text), min_tokens(model)
        if count < least:
            message = (
                f"Cached content is too small. total_token_count={count}, "
                f"min_total_token_count={least}"
            )
            return error(400, "INVALID_ARGUMENT", message)
        with self._lock:
            name = f"cachedContents/fake{next(self._ids)}"
            resource = Resource(model, text, count, self.clock() + float(ttl[1]))
            self.resources[name] = resource
            self.created.append(name)
            self.resources_created_tokens[name] = count
            return Reply.json(self._shown(name, resource))

    def _live(self, name: str) -> Resource | None:
        resource = self.resources.get(name)
        if resource is not None and resource.expires <= self.clock():
            del self.resources[name]
            return None
        return resource

    def _shown(self, name: str, resource: Resource) -> dict[str, Any]:
        return {
            "name": name,
            "model": resource.model,
            "expireTime": f"{resource.expires:.0f}s on the fake's clock",
            "usageMetadata": {"totalTokenCount": resource.tokens},
        }

    # -- generateContent ---------------------------------------------------------------

    def refusal(self, request: Recorded) -> Reply | None:
        """The API's error for a request naming a cached content it may not use."""
        body = request.body if isinstance(request.body, dict) else {}
        name = body.get("cachedContent")
        if name is None:
            return None
        if any(f in body for f in PREFIX_FIELDS):
            message = (
                "CachedContent can not be used with GenerateContent request setting "
                "system_instruction, tools or tool_config."
            )
            return error(400, "INVALID_ARGUMENT", message)
        with self._lock:
            resource = self._live(str(name))
        if resource is None:
            return error(403, "PERMISSION_DENIED", self.not_found)
        if resource.model != "models/" + model_of(request.path):
            return error(400, "INVALID_ARGUMENT", "the cached content is for another model")
        return None

    def usage(self, request: Recorded) -> tuple[int, int]:
        """(promptTokenCount, cachedContentTokenCount) for an accepted request."""
        body = request.body if isinstance(request.body, dict) else {}
        model = model_of(request.path)
        name = body.get("cachedContent")
        with self._lock:
            if name is not None:
                resource = self.resources[str(name)]
                return resource.tokens + tokens(contents_text(body)), resource.tokens
            prompt = prefix_text(body) + contents_text(body)
            now = self.clock()
            seen = {p: t for p, t in self.seen.get(model, {}).items() if t > now}
            common = max((_common_prefix(prompt, p) for p in seen), default=0)
            seen[prompt] = now + IMPLICIT_RETENTION_S
            self.seen[model] = seen
        matched = common // CHARS_PER_TOKEN
        return tokens(prompt), matched if matched >= min_tokens(model) else 0
