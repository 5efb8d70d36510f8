"""Lossless coercion of a tool call's input to its schema, before validation (as the MCP
client does): models often quote numbers and booleans, or send an object as JSON text.

A string is replaced only where the schema's `type` does not allow a string, and only
when the replacement says exactly what the string said:

- `integer`: an integer literal (`"2"` → 2; never `"2.5"`, `"02"`, `" 2"`, `"1e3"`);
- `number`: a JSON number literal (`"2"` → 2, `"2.5"` → 2.5);
- `boolean`: `"true"` / `"false"`;
- `object` / `array`: JSON text holding an object / an array.

It walks an object's `properties` and an array's `items` (one schema), nothing else:
a value under `anyOf`, `oneOf`, `$ref`, … is left as the model sent it. The paths it
changed (`a`, `b/c`, `list/0`) are returned, for the tool-call event.
"""

from __future__ import annotations

import json
import re
from typing import Any

INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
BOOLEANS = {"true": True, "false": False}


def coerce_input(schema: Any, value: Any) -> tuple[Any, list[str]]:
    """(the value, coerced where lossless, the paths coerced)."""
    coerced: list[str] = []
    return _walk(schema, value, [], coerced), coerced


def _types(schema: dict[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def _walk(schema: Any, value: Any, path: list[str], coerced: list[str]) -> Any:
    if not isinstance(schema, dict):
        return value
    if isinstance(value, str):
        found = _from_string(_types(schema), value)
        if found is None:
            return value
        coerced.append("/".join(path) or "(input)")
        value = found[0]
    if isinstance(value, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            return {
                key: _walk(properties.get(key), item, [*path, key], coerced)
                for key, item in value.items()
            }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [
            _walk(schema["items"], item, [*path, str(i)], coerced) for i, item in enumerate(value)
        ]
    return value


def _from_string(types: set[str], text: str) -> tuple[Any] | None:
    """(the value the string stands for,) under these types, or None to leave it."""
    if not types or "string" in types:
        return None
    if "integer" in types and INTEGER.fullmatch(text):
        return (int(text),)
    if "number" in types and NUMBER.fullmatch(text):
        number = json.loads(text)
        return (number,) if number not in (float("inf"), float("-inf")) else None
    if "boolean" in types and text in BOOLEANS:
        return (BOOLEANS[text],)
    if types & {"object", "array"} and text.lstrip()[:1] in ("{", "["):
        try:
            parsed = json.loads(text)
        except ValueError:
            return None
        if (isinstance(parsed, dict) and "object" in types) or (
            isinstance(parsed, list) and "array" in types
        ):
            return (parsed,)
    return None
