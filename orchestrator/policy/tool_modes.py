"""How tools reach a model: `model.options.tool_mode` (in a spec or a models-file endpoint).

- `native` (the default): the provider's own function calling;
- `prompt`: an XML `<tool_use>` format taught in the system prompt
  (workers/models/prompt_tools.py);
- `text`: the MCP client's `TOOL: name` / `PARAMETERS: {...}` lines
  (workers/models/text_tools.py).

Checked at submit on the options a step will use (the endpoint's and the spec's,
merged), so a mistyped mode fails there rather than silently falling back to native
tools on every step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from agentq.orchestrator.core.errors import SpecError

ToolMode = Literal["native", "prompt", "text"]
_MODES: dict[str, ToolMode] = {"native": "native", "prompt": "prompt", "text": "text"}
TOOL_MODES = tuple(_MODES)


def tool_mode(options: Mapping[str, Any]) -> ToolMode:
    """The mode the options ask for, or a SpecError naming the allowed values."""
    value = options.get("tool_mode", "native")
    mode = _MODES.get(value) if isinstance(value, str) else None
    if mode is not None:
        return mode
    raise SpecError(
        f"model.options.tool_mode: {value!r} is not a tool mode (use one of: "
        f"{', '.join(TOOL_MODES)})"
    )
