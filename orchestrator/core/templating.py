"""`{{ref}}` templates over JSON values, for sub-agent specs and workflow nodes.

A string that is exactly one `{{ref}}` becomes the referenced value with its JSON type
(a number stays a number); any other string gets each reference interpolated as text
(strings as they are, other values as JSON). A reference is a dotted path: a root name
(an input field, a workflow node id) and then keys or list indices. Nothing is
evaluated: a template can only read the values it is given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

REF = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*)\s*\}\}")


class TemplateError(ValueError):
    """A reference names nothing in the values given."""


def references(value: Any) -> list[str]:
    """Every reference in a JSON value, in order (dotted paths as written)."""
    if isinstance(value, str):
        return REF.findall(value)
    if isinstance(value, Mapping):
        return [r for v in value.values() for r in references(v)]
    if isinstance(value, list):
        return [r for v in value for r in references(v)]
    return []


def root(ref: str) -> str:
    return ref.split(".", 1)[0]


def lookup(values: Mapping[str, Any], ref: str) -> Any:
    """The value a dotted path names; TemplateError when it names nothing."""
    current: Any = values
    for part in ref.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise TemplateError(f"{{{{{ref}}}}} names nothing ({part!r} is missing)")
    return current


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def render(value: Any, values: Mapping[str, Any]) -> Any:
    """The template with its references filled in from `values`."""
    if isinstance(value, str):
        whole = REF.fullmatch(value.strip())
        if whole is not None:
            return lookup(values, whole.group(1))
        return REF.sub(lambda m: _as_text(lookup(values, m.group(1))), value)
    if isinstance(value, Mapping):
        return {k: render(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, values) for v in value]
    return value
