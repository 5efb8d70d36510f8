"""Answering a server's elicitation request according to the server's policy.

`decline` answers no; `accept-defaults` fills the form with the schema's
defaults (and declines when a required field has none, since a guess would
be worse than no answer); `forward` asks whoever drives the run through
`ToolContext.elicit`, which parks the call until an answer is posted.
URL-mode elicitation (open this link) cannot be done by a worker: declined.
"""

from __future__ import annotations

from typing import Any, Literal

import mcp_types as types

from agentq.workers.tools.context import ToolContext

Policy = Literal["decline", "accept-defaults", "forward"]
DECLINE = types.ElicitResult(action="decline")

Answer = dict[str, str | int | float | bool | list[str] | None]


def schema_defaults(schema: dict[str, Any]) -> Answer | None:
    """The answer made of the schema's defaults, or None if a required field has none."""
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return None
    answer: Answer = {}
    for name, prop in properties.items():
        if isinstance(prop, dict) and "default" in prop:
            answer[name] = prop["default"]
    required = schema.get("required") or []
    if any(name not in answer for name in required):
        return None
    return answer


async def answer_elicitation(
    policy: Policy, params: types.ElicitRequestParams, call: ToolContext | None
) -> types.ElicitResult:
    if not isinstance(params, types.ElicitRequestFormParams) or policy == "decline":
        return DECLINE
    schema = params.requested_schema
    if policy == "accept-defaults":
        defaults = schema_defaults(schema)
        if defaults is None:
            return DECLINE
        return types.ElicitResult(action="accept", content=defaults)
    if call is None or call.elicit is None:
        # Nothing to forward to: the request could not be tied to one call
        # (see pool.py) or this call's driver takes no input.
        return DECLINE
    answer = await call.elicit(params.message, schema)
    if answer is None:
        return DECLINE
    return types.ElicitResult(action="accept", content=_as_answer(answer))


def _as_answer(answer: dict[str, Any]) -> Answer:
    # The wire allows only primitives and string lists; anything richer is
    # sent as its JSON-ish string rather than failing the whole answer.
    result: Answer = {}
    for key, value in answer.items():
        if value is None or isinstance(value, str | int | float | bool):
            result[key] = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            result[key] = list(value)
        else:
            result[key] = str(value)
    return result
