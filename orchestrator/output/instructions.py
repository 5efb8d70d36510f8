"""What the model is told: the schema in the system prompt (prompted mode), the final-answer
tool (tool mode), and the message that sends an invalid output back."""

from __future__ import annotations

import json
from typing import Any

# The final-answer tool of tool mode; a run's own tool of that name is refused at submit.
OUTPUT_TOOL = "final_result"
OUTPUT_TOOL_DESCRIPTION = "Give the final answer. Call this once, when you have the answer."

# Opens every message that sends an invalid output back: how a step counts the earlier
# attempts in the history.
RETRY_PREFIX = "Your answer did not match the required output schema"


def prompted_system(system: str | None, schema: dict[str, Any]) -> str:
    """The system prompt with the schema the answer must match."""
    told = (
        "Answer with one JSON value that matches this JSON Schema, and nothing else "
        "(no prose, no Markdown fence):\n" + json.dumps(schema, ensure_ascii=False)
    )
    return f"{system}\n\n{told}" if system else told


def retry_text(problems: list[str], *, mode: str) -> str:
    """The message an invalid output gets back, naming every problem."""
    how = (
        f"Call the {OUTPUT_TOOL} tool with the answer."
        if mode == "tool"
        else "Answer again with only the JSON value."
    )
    listed = "\n".join(f"- {p}" for p in problems)
    return f"{RETRY_PREFIX}:\n{listed}\n{how}"
