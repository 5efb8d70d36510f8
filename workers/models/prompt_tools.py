"""Prompt-based tool calling, for models without native tools: tools are taught in the
system prompt and calls are read back from the model's text.

Wraps any provider. No native tools are sent; the system prompt teaches a format
(`CallFormat`: the XML `<tool_use>` blocks of `tool_mode: "prompt"`, here, or the
`TOOL:` / `PARAMETERS:` lines of `tool_mode: "text"`, workers/models/text_tools.py).
The model's text is parsed into calls that go through the same loop as native ones;
the streamed text stops where the first call begins, and the step's text is the
prose without the calls. Earlier calls and results in the history are rendered back
in the same format.

A `<tool_use>` block that cannot be parsed still becomes a call (named
`invalid_tool_use`) carrying its parse problem: the loop answers it with a tool
error that quotes the problem and the raw block, so the model can correct itself.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from agentq.orchestrator.core.media import MediaLimits, result_text
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.spec.run import ToolChoiceTool
from agentq.workers.models.base import DeltaSink, ModelRequest, OfferedTool, Provider
from agentq.workers.models.history import arguments_text


class CallFormat(Protocol):
    """One way of writing tool calls in plain text."""

    # The system prompt's lesson, with `{requirement}` and `{tools}` to fill in.
    instructions: str

    def call_start(self, text: str) -> int:
        """Where the first call begins in the text streamed so far; -1: none yet."""
        ...

    def held_tail(self, text: str) -> int:
        """How many characters at the end might begin a call, held until more arrives."""
        ...

    def render_call(self, part: ToolCallPart) -> str: ...

    def render_result(self, part: ToolResultPart, text: str) -> str: ...

    def parse(
        self, text: str, step: int, tools: list[OfferedTool]
    ) -> tuple[str, list[ProviderToolCall]]:
        """(the prose without the calls, the calls)."""
        ...


OPEN = "<tool_use>"
BLOCK = re.compile(r"<tool_use>(.*?)(?:</tool_use>|\Z)", re.DOTALL)
NAME = re.compile(r"<name>\s*(.*?)\s*</name>", re.DOTALL)
ARGUMENTS = re.compile(r"<arguments>\s*(.*?)\s*</arguments>", re.DOTALL)
FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
EMPTY_FENCE = re.compile(r"```[a-zA-Z]*\s*```")
MALFORMED = "invalid_tool_use"
MAX_BLOCK_SHOWN = 2000

INSTRUCTIONS = """\
You can call tools. To call one, write a block exactly like this:

<tool_use>
<name>TOOL_NAME</name>
<arguments>{{"param": "value"}}</arguments>
</tool_use>

The arguments are one JSON object that matches the tool's input schema. You may
write several blocks to call several tools at once. After your blocks, stop and
wait: the results come back in <tool_result> blocks (or <tool_error> when a call
failed). When you need no tool, answer in plain text without any block.
{requirement}
Available tools:
{tools}"""


def render_tools(tools: list[OfferedTool]) -> str:
    return "\n".join(
        f"- {t.name}: {t.description or '(no description)'}\n"
        f"  input schema: {json.dumps(t.input_schema, ensure_ascii=False)}"
        for t in tools
    )


def system_prompt(request: ModelRequest, fmt: CallFormat) -> str | None:
    tools = [t for t in request.tools if not t.provider_executed]
    if not tools or request.tool_choice == "none":
        return request.system
    requirement = ""
    if request.tool_choice == "required":
        requirement = "You must call at least one tool in this answer.\n"
    elif isinstance(request.tool_choice, ToolChoiceTool):
        requirement = f"You must call the tool {request.tool_choice.tool} in this answer.\n"
    prompt = fmt.instructions.format(requirement=requirement, tools=render_tools(tools))
    return f"{request.system}\n\n{prompt}" if request.system else prompt


def render_history(
    messages: list[Message], fmt: CallFormat, media: MediaLimits | None = None
) -> list[Message]:
    """Native tool messages become text, since the model was never told about native tools."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls():
            pieces = [message.text()] if message.text() else []
            pieces += [fmt.render_call(c) for c in message.tool_calls() if not c.provider_executed]
            out.append(AssistantMessage(content="\n".join(pieces)))
        elif isinstance(message, ToolMessage):
            blocks = [
                fmt.render_result(part, result_text(part.for_model, part.tool_call_id, media))
                for part in message.content
            ]
            out.append(UserMessage(content="\n".join(blocks)))
        else:
            out.append(message)
    return out


def _unfence(text: str) -> str:
    return FENCE.sub("", text.strip()).strip()


def _problem(name: re.Match[str] | None) -> str:
    """What keeps a block from being a call (its name, or else its arguments)."""
    if name is None:
        return "it has no <name> element"
    if not name.group(1):
        return "its <name> element is empty"
    return "it has no <arguments> element"


def malformed_call(call_id: str, block: str, problem: str) -> ProviderToolCall:
    """A block the model wrote wrong, as a call the loop answers with a tool error: what is
    wrong, what it wrote (cut to a sane size), and the form to use."""
    shown = block if len(block) <= MAX_BLOCK_SHOWN else block[:MAX_BLOCK_SHOWN] + "…(truncated)"
    message = (
        f"Your {OPEN} block could not be parsed: {problem}. The block was:\n{shown}\n"
        f"Write each call as {OPEN}<name>TOOL_NAME</name><arguments>{{...JSON object...}}"
        "</arguments></tool_use>."
    )
    return ProviderToolCall(id=call_id, name=MALFORMED, arguments=block, parse_error=message)


def parse_calls(text: str, step: int) -> tuple[str, list[ProviderToolCall]]:
    """(the text without the blocks, the calls). Tolerates whitespace, code fences around
    blocks or arguments, several blocks, and an unterminated last block."""
    calls: list[ProviderToolCall] = []
    for index, match in enumerate(BLOCK.finditer(text)):
        body = match.group(1)
        name = NAME.search(body)
        arguments = ARGUMENTS.search(body)
        call_id = f"call_{step}_{index}"
        if name is None or not name.group(1) or arguments is None:
            calls.append(malformed_call(call_id, match.group(0).strip(), _problem(name)))
            continue
        calls.append(
            ProviderToolCall(id=call_id, name=name.group(1), arguments=_unfence(arguments.group(1)))
        )
    remaining = EMPTY_FENCE.sub("", BLOCK.sub("", text)).strip()
    return remaining, calls


class XmlFormat:
    """`tool_mode: "prompt"`: `<tool_use><name>…</name><arguments>{…}</arguments></tool_use>`."""

    instructions = INSTRUCTIONS

    def call_start(self, text: str) -> int:
        return text.find(OPEN)

    def held_tail(self, text: str) -> int:
        return max((n for n in range(1, len(OPEN)) if text.endswith(OPEN[:n])), default=0)

    def render_call(self, part: ToolCallPart) -> str:
        if part.tool_name == MALFORMED and isinstance(part.input, str):
            return part.input  # the block as the model wrote it, which its tool error quotes
        return (
            f"{OPEN}\n<name>{part.tool_name}</name>\n"
            f"<arguments>{arguments_text(part.input)}</arguments>\n</tool_use>"
        )

    def render_result(self, part: ToolResultPart, text: str) -> str:
        tag = "tool_error" if part.is_error else "tool_result"
        return f'<{tag} name="{part.tool_name}">\n{text}\n</{tag}>'

    def parse(
        self, text: str, step: int, tools: list[OfferedTool]
    ) -> tuple[str, list[ProviderToolCall]]:
        return parse_calls(text, step)


XML = XmlFormat()


class HoldBackSink:
    """Streams the prose and holds back anything from the first call on."""

    def __init__(self, inner: DeltaSink, fmt: CallFormat) -> None:
        self.inner = inner
        self.fmt = fmt
        self.buffer = ""
        self.stopped = False

    async def text_delta(self, delta: str) -> None:
        if self.stopped:
            return
        self.buffer += delta
        at = self.fmt.call_start(self.buffer)
        if at >= 0:
            self.stopped = True
            await self._emit(self.buffer[:at].rstrip().removesuffix("```xml").removesuffix("```"))
            return
        keep = self.fmt.held_tail(self.buffer)
        await self._emit(self.buffer[: len(self.buffer) - keep])
        self.buffer = self.buffer[len(self.buffer) - keep :]

    async def reasoning_delta(self, delta: str) -> None:
        await self.inner.reasoning_delta(delta)  # never holds a tool call

    async def tool_input_start(self, call_id: str, tool_name: str) -> None:
        await self.inner.tool_input_start(call_id, tool_name)

    async def tool_input_delta(self, call_id: str, delta: str) -> None:
        await self.inner.tool_input_delta(call_id, delta)

    async def flush(self) -> None:
        if not self.stopped:
            await self._emit(self.buffer)
        self.buffer = ""

    async def _emit(self, text: str) -> None:
        if text:
            await self.inner.text_delta(text)


class PromptToolsProvider:
    def __init__(self, inner: Provider, fmt: CallFormat) -> None:
        self.inner = inner
        self.fmt = fmt

    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        changes: dict[str, Any] = {
            "system": system_prompt(request, self.fmt),
            "messages": render_history(
                request.messages, self.fmt, MediaLimits.from_options(request.model.options)
            ),
            "tools": [t for t in request.tools if t.provider_executed],
            "tool_choice": "auto",
        }
        held = HoldBackSink(sink, self.fmt)
        response = await self.inner.generate(request.model_copy(update=changes), held)
        await held.flush()
        if request.tool_choice == "none" or not request.tools:
            return response
        offered = [t for t in request.tools if not t.provider_executed]
        text, calls = self.fmt.parse(response.text, request.step, offered)
        if not calls:
            return response
        return response.model_copy(
            update={
                "text": text,
                "tool_calls": [*response.tool_calls, *calls],
                "finish_reason": "tool-calls",
            }
        )
