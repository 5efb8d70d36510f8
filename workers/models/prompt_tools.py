"""Prompt-based tool calling (`options.tool_mode: "prompt"`), for models without native tools.

Wraps any provider. Tools are described in the system prompt, which teaches an
XML format; no native tools are sent. The model's text is parsed into calls
that go through the same loop as native ones. A block that cannot be parsed
still becomes a call (named `invalid_tool_use`) carrying its parse problem: the
loop answers it with a tool error that quotes the problem and the raw block, so
the model can correct itself.
Earlier calls and results in the history are rendered back as the same XML.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentq.orchestrator.core.media import MediaLimits, result_text
from agentq.orchestrator.core.messages import (
    AssistantMessage,
    Message,
    ToolCallPart,
    ToolMessage,
    UserMessage,
)
from agentq.orchestrator.core.model_io import ModelResponse, ProviderToolCall
from agentq.orchestrator.spec.run import ToolChoiceTool
from agentq.workers.models.base import DeltaSink, ModelRequest, OfferedTool, Provider
from agentq.workers.models.history import arguments_text

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


def system_prompt(request: ModelRequest) -> str | None:
    tools = [t for t in request.tools if not t.provider_executed]
    if not tools or request.tool_choice == "none":
        return request.system
    requirement = ""
    if request.tool_choice == "required":
        requirement = "You must call at least one tool in this answer.\n"
    elif isinstance(request.tool_choice, ToolChoiceTool):
        requirement = f"You must call the tool {request.tool_choice.tool} in this answer.\n"
    prompt = INSTRUCTIONS.format(requirement=requirement, tools=render_tools(tools))
    return f"{request.system}\n\n{prompt}" if request.system else prompt


def render_call(part: ToolCallPart) -> str:
    if part.tool_name == MALFORMED and isinstance(part.input, str):
        return part.input  # the block as the model wrote it, which its tool error quotes
    return (
        f"{OPEN}\n<name>{part.tool_name}</name>\n"
        f"<arguments>{arguments_text(part.input)}</arguments>\n</tool_use>"
    )


def render_history(messages: list[Message], media: MediaLimits | None = None) -> list[Message]:
    """Native tool messages become text, since the model was never told about native tools."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls():
            pieces = [message.text()] if message.text() else []
            pieces += [render_call(c) for c in message.tool_calls() if not c.provider_executed]
            out.append(AssistantMessage(content="\n".join(pieces)))
        elif isinstance(message, ToolMessage):
            blocks = []
            for part in message.content:
                tag = "tool_error" if part.is_error else "tool_result"
                blocks.append(
                    f'<{tag} name="{part.tool_name}">\n'
                    f"{result_text(part.output, part.tool_call_id, media)}\n</{tag}>"
                )
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


class _HoldBackSink:
    """Streams the prose and holds back anything from the first `<tool_use>` on."""

    def __init__(self, inner: DeltaSink) -> None:
        self.inner = inner
        self.buffer = ""
        self.stopped = False

    async def text_delta(self, delta: str) -> None:
        if self.stopped:
            return
        self.buffer += delta
        at = self.buffer.find(OPEN)
        if at >= 0:
            self.stopped = True
            await self._emit(self.buffer[:at].rstrip().removesuffix("```xml").removesuffix("```"))
            return
        # Keep a tail that could be the start of "<tool_use>".
        keep = max((n for n in range(1, len(OPEN)) if self.buffer.endswith(OPEN[:n])), default=0)
        await self._emit(self.buffer[: len(self.buffer) - keep])
        self.buffer = self.buffer[len(self.buffer) - keep :]

    async def reasoning_delta(self, delta: str) -> None:
        await self.inner.reasoning_delta(delta)  # never holds a tool call

    async def flush(self) -> None:
        if not self.stopped:
            await self._emit(self.buffer)
        self.buffer = ""

    async def _emit(self, text: str) -> None:
        if text:
            await self.inner.text_delta(text)


class PromptToolsProvider:
    def __init__(self, inner: Provider) -> None:
        self.inner = inner

    async def generate(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        changes: dict[str, Any] = {
            "system": system_prompt(request),
            "messages": render_history(
                request.messages, MediaLimits.from_options(request.model.options)
            ),
            "tools": [t for t in request.tools if t.provider_executed],
            "tool_choice": "auto",
        }
        held = _HoldBackSink(sink)
        response = await self.inner.generate(request.model_copy(update=changes), held)
        await held.flush()
        if request.tool_choice == "none" or not request.tools:
            return response
        text, calls = parse_calls(response.text, request.step)
        if not calls:
            return response
        return response.model_copy(
            update={
                "text": text,
                "tool_calls": [*response.tool_calls, *calls],
                "finish_reason": "tool-calls",
            }
        )
