"""A batch's input lines, parsed and templated (pure).

A line is either a full RunSpec, or `{"custom_id", "spec"?, "vars"?, "prompt"?,
"messages"?}` over a template (a RunSpec without its prompt): `spec` is merged into the
template, `prompt`/`messages` replace the template's, and `vars` fill `{{name}}`
placeholders in the prompt and system. `custom_id` defaults to the line number.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.spec.run import RunSpec

LINE_FIELDS = frozenset({"custom_id", "spec", "vars", "prompt", "messages"})
# What a line may hold: its own fields, or a whole RunSpec's (and custom_id).
KNOWN_FIELDS = LINE_FIELDS | frozenset(RunSpec.model_fields)
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
# What a custom_id may be: printable, bounded (it is a hash field and a results column).
MAX_CUSTOM_ID = 256


class BatchInputError(SpecError):
    """A line of the input is wrong: the message names the line."""


@dataclass(frozen=True)
class BatchLine:
    line: int  # 1-based
    custom_id: str
    spec: RunSpec


def fill(text: str, values: Mapping[str, Any], line: int) -> str:
    """`{{name}}` placeholders replaced by their values; a missing one is an error."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise BatchInputError(f"line {line}: no value for {{{{{name}}}}} in its vars")
        found = values[name]
        return found if isinstance(found, str) else json.dumps(found)

    return PLACEHOLDER.sub(value, text)


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _templated(obj: Mapping[str, Any], template: Mapping[str, Any] | None, line: int) -> Any:
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        raise BatchInputError(f"line {line}: 'spec' must be an object")
    if template is None and spec is None:
        raise BatchInputError(
            f"line {line}: no spec and no template (give the line a 'spec', or submit "
            "with --spec TEMPLATE.json or --agent NAME)"
        )
    merged = _merge(dict(template or {}), spec or {})
    for field in ("prompt", "messages"):
        if field in obj:
            merged[field] = obj[field]
    values = obj.get("vars") or {}
    if not isinstance(values, Mapping):
        raise BatchInputError(f"line {line}: 'vars' must be an object")
    for field in ("prompt", "system"):
        if isinstance(merged.get(field), str):
            merged[field] = fill(merged[field], values, line)
    return merged


def _custom_id(value: Any, line: int) -> str:
    if value is None:
        return str(line)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise BatchInputError(f"line {line}: custom_id must be a string or an integer")
    text = str(value)
    if not text or len(text) > MAX_CUSTOM_ID or not text.isprintable():
        raise BatchInputError(
            f"line {line}: custom_id must be 1-{MAX_CUSTOM_ID} printable characters"
        )
    return text


def _check_fields(obj: Mapping[str, Any], line: int) -> None:
    """A misspelled field is named as such, not reported as the spec's missing `model`."""
    for name in sorted(set(obj) - KNOWN_FIELDS):
        near = difflib.get_close_matches(name, KNOWN_FIELDS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise BatchInputError(f"line {line}: unknown field {name!r}{hint}")


def parse_line(
    text: str,
    line: int,
    template: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> BatchLine:
    """One input line as a validated spec (with `metadata` added to its own)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BatchInputError(f"line {line}: not JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise BatchInputError(f"line {line}: expected a JSON object")
    _check_fields(obj, line)
    custom_id = _custom_id(obj.get("custom_id"), line)
    if set(obj) <= LINE_FIELDS:
        raw = _templated(obj, template, line)
    else:
        raw = {k: v for k, v in obj.items() if k != "custom_id"}  # a full RunSpec
    if not isinstance(raw, dict):
        raise BatchInputError(f"line {line}: expected a JSON object")
    if raw.get("id") is not None:
        raise BatchInputError(f"line {line}: a batch line cannot set the run id")
    if metadata:
        raw["metadata"] = {**(raw.get("metadata") or {}), **metadata}
    try:
        spec = RunSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise BatchInputError(f"line {line}: {where or 'spec'}: {first.get('msg')}") from None
    return BatchLine(line=line, custom_id=custom_id, spec=spec)


def numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based line numbers (blank lines keep their number)."""
    for number, text in enumerate(lines, start=1):
        if text.strip():
            yield number, text


def parse_lines(
    lines: Iterable[str],
    template: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Iterator[BatchLine]:
    for number, text in numbered(lines):
        yield parse_line(text, number, template, metadata)


def duplicate_message(duplicates: Iterable[tuple[int, int, str]], limit: int = 10) -> str:
    """`(line, first line, custom_id)` triples as one line naming them."""
    items = list(duplicates)
    shown = ", ".join(
        f"line {line} repeats line {first} ({cid!r})" for line, first, cid in items[:limit]
    )
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return f"duplicate custom_id: {shown}{more}"
