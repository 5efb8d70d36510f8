"""A `to_model_output` hook the end-to-end tests load into an `agentq worker --tools` of
its own: the worker that runs the tool has not registered it, so it is called as a
`hook` job on this one."""

from __future__ import annotations

from typing import Any

from agentq import to_model_output
from tests.support.call_tools import TINY_PNG


@to_model_output
def as_picture(output: Any) -> list[Any]:
    """Shows the model a picture instead of the output (a number, say)."""
    return [
        f"a picture of {output}",
        {"type": "media", "media_type": "image/png", "data": TINY_PNG},
    ]
