"""`tool_mode: "text"`: the MCP client's plain-text tool calls, for models that follow a
line format better than XML or native tools.

The model calls a tool by writing, each at the start of a line:

    TOOL: get_weather
    PARAMETERS: {"city": "Paris"}

several pairs per message if it likes; prose may come before, between and after
them. `PARAMETERS` may span lines (the JSON ends where the object does), sit in a
code fence, or be left out (no input). Arguments that are not JSON are kept as
written, so the loop answers the call with a tool error the model sees. When the
text holds no `TOOL:` line, the fallback reads "use the X tool" as a call of X with
`{}`, if X is offered and its schema requires nothing. Results come back as
`TOOL RESULT: name` (or `TOOL ERROR: name`) followed by the content.

Pure: the provider wrapper that teaches, streams and parses is
workers/models/prompt_tools.py.
"""

from __future__ import annotations

import json
import re

from agentq.orchestrator.core.messages import ToolCallPart, ToolResultPart
from agentq.orchestrator.core.model_io import ProviderToolCall
from agentq.workers.models.base import OfferedTool
from agentq.workers.models.history import arguments_text

MARKER = "TOOL:"
TOOL_LINE = re.compile(r"^[ \t]*TOOL:[ \t]*(?P<name>[^\n]*)", re.MULTILINE)
PARAMETERS = re.compile(r"\s*PARAMETERS:[ \t]*(?:```[a-zA-Z]*\s*)?")
CLOSING_FENCE = re.compile(r"\s*```")
USE_TOOL = re.compile(r"\buse (?:the )?[`'\"*]*(?P<name>[A-Za-z_][\w.-]*?)[`'\"*]* tool\b", re.I)
BLANK_RUNS = re.compile(r"\n{3,}")
MISNAMED = "invalid_tool_call"

INSTRUCTIONS = """\
You can call tools. To call one, write these two lines, each at the start of a line:

TOOL: tool_name
PARAMETERS: {{"param": "value"}}

PARAMETERS is one JSON object that matches the tool's input schema ({{}} when it needs
nothing). You may write several such pairs to call several tools at once. After them,
stop and wait: each result comes back as "TOOL RESULT: tool_name" (or "TOOL ERROR:
tool_name" when the call failed) followed by its content. When you need no tool,
answer in plain text without any TOOL line.
{requirement}
Available tools:
{tools}"""


def _name(raw: str) -> str:
    return raw.strip().strip("`*\"'").strip()


def _parameters(text: str, start: int, limit: int) -> tuple[str, int]:
    """(the arguments as written, where the call ends) for the call whose TOOL line ends at
    `start`; the next call (or the text) ends at `limit`."""
    found = PARAMETERS.match(text, start, limit)
    if found is None:
        return "", start  # no PARAMETERS line: no input
    at = found.end()
    try:
        _, end = json.JSONDecoder().raw_decode(text[:limit], at)
    except ValueError:
        # Not JSON: keep what was written (to the end of its paragraph) for the tool error.
        stop = text.find("\n\n", at, limit)
        stop = limit if stop < 0 else stop
        return text[at:stop].strip(), stop
    fence = CLOSING_FENCE.match(text, end, limit)
    return text[at:end], fence.end() if fence else end


def _fallback(text: str, step: int, tools: list[OfferedTool]) -> list[ProviderToolCall]:
    """'use the X tool': a call of X with no input, where X's schema requires nothing."""
    offered = {t.name: t for t in tools}
    names: list[str] = []
    for match in USE_TOOL.finditer(text):
        tool = offered.get(match.group("name"))
        if tool is not None and not tool.input_schema.get("required") and tool.name not in names:
            names.append(tool.name)
    return [
        ProviderToolCall(id=f"call_{step}_{i}", name=name, arguments="{}")
        for i, name in enumerate(names)
    ]


def parse_calls(
    text: str, step: int, tools: list[OfferedTool]
) -> tuple[str, list[ProviderToolCall]]:
    """(the prose without the calls, the calls) of a model's text."""
    lines = list(TOOL_LINE.finditer(text))
    if not lines:
        return text.strip(), _fallback(text, step, tools)
    calls: list[ProviderToolCall] = []
    prose: list[str] = []
    pos = 0
    for index, line in enumerate(lines):
        prose.append(text[pos : line.start()])
        limit = lines[index + 1].start() if index + 1 < len(lines) else len(text)
        arguments, pos = _parameters(text, line.end(), limit)
        call_id = f"call_{step}_{index}"
        name = _name(line.group("name"))
        if not name:
            written = text[line.start() : pos].strip()
            calls.append(
                ProviderToolCall(
                    id=call_id,
                    name=MISNAMED,
                    arguments=arguments,
                    parse_error=f"Your TOOL line names no tool: {written!r}. Write "
                    '"TOOL: tool_name" and, on the next line, "PARAMETERS: {...JSON object...}".',
                )
            )
            continue
        calls.append(ProviderToolCall(id=call_id, name=name, arguments=arguments))
    prose.append(text[pos:])
    return BLANK_RUNS.sub("\n\n", "".join(prose)).strip(), calls


class TextFormat:
    """The `CallFormat` of `tool_mode: "text"` (workers/models/prompt_tools.py)."""

    instructions = INSTRUCTIONS

    def call_start(self, text: str) -> int:
        found = TOOL_LINE.search(text)
        return -1 if found is None else found.start()

    def held_tail(self, text: str) -> int:
        """The last line while it could still become a TOOL line, with the blank space
        before it (the stream shows no trailing blank lines before a call)."""
        line_start = text.rfind("\n") + 1
        if not MARKER.startswith(text[line_start:].lstrip(" \t")):
            return 0
        return len(text) - len(text[:line_start].rstrip())

    def render_call(self, part: ToolCallPart) -> str:
        # A call that named no tool is shown as written, which its tool error quotes.
        name = "" if part.tool_name == MISNAMED else f" {part.tool_name}"
        return f"TOOL:{name}\nPARAMETERS: {arguments_text(part.input)}"

    def render_result(self, part: ToolResultPart, text: str) -> str:
        return f"TOOL {'ERROR' if part.is_error else 'RESULT'}: {part.tool_name}\n{text}"

    def parse(
        self, text: str, step: int, tools: list[OfferedTool]
    ) -> tuple[str, list[ProviderToolCall]]:
        return parse_calls(text, step, tools)


TEXT = TextFormat()
