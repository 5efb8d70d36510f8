"""Live, readable progress of a run on a terminal (and plain lines elsewhere)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from agentq.orchestrator.events import Event
from agentq.orchestrator.result import RunResult


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ProgressPrinter:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._in_text = False

    def _end_text(self) -> None:
        if self._in_text:
            self.console.print()
            self._in_text = False

    def show(self, event: Event) -> None:
        fields = event.model_extra or {}
        kind = event.type
        if kind == "text-delta":
            self.console.print(escape(str(fields.get("delta", ""))), end="", style="white")
            self._in_text = True
            return
        self._end_text()
        call = f"{event.tool_name}[dim]#{event.tool_call_id}[/]" if event.tool_call_id else ""
        if kind == "start":
            model = fields.get("model", "")
            note = (
                "  [yellow](scripted: no model is called)[/]"
                if str(model).startswith("scripted")
                else ""
            )
            self.console.print(f"[bold]run[/] {event.run_id}  model {escape(str(model))}{note}")
        elif kind == "start-step":
            attempt = fields.get("attempt", 1)
            retry = f" [yellow](attempt {attempt})[/]" if attempt and attempt > 1 else ""
            self.console.print(f"[bold cyan]── step {event.step}[/]{retry}")
        elif kind == "tool-call":
            self.console.print(f"  [magenta]→ {call}[/]({escape(_short(fields.get('input')))})")
        elif kind == "tool-approval-request":
            self.console.print(f"  [yellow]? {call} waits for approval[/]")
        elif kind == "tool-approval-response":
            verdict = "approved" if fields.get("approved") else "denied"
            self.console.print(f"  [yellow]  {call} {verdict}[/]")
        elif kind == "tool-progress":
            self.console.print(f"  [dim]… {call} {escape(_short(fields.get('output')))}[/]")
        elif kind == "tool-result":
            self.console.print(f"  [green]← {call}[/] {escape(_short(fields.get('output')))}")
        elif kind == "tool-error":
            self.console.print(f"  [red]✗ {call}[/] {escape(_short(fields.get('error')))}")
        elif kind == "finish-step":
            usage = fields.get("usage") or {}
            tokens = usage.get("total_tokens", 0)
            self.console.print(
                f"  [dim]step {event.step} done: {fields.get('finish_reason')}, {tokens} tokens[/]"
            )
        elif kind == "finish":
            self.console.print("[bold green]✓ finished[/]")
        elif kind == "error":
            error = fields.get("error") or {}
            self.console.print(f"[bold red]✗ failed:[/] {escape(str(error.get('message', error)))}")
        elif kind == "abort":
            self.console.print("[bold yellow]⊘ cancelled[/]")

    def summary(self, result: RunResult) -> None:
        self._end_text()
        if result.text:
            self.console.print()
            self.console.print("[bold]Answer:[/]", escape(result.text))
        u = result.usage
        self.console.print(
            f"[dim]{result.status}: {len(result.steps)} steps, "
            f"{u.input_tokens} in / {u.output_tokens} out tokens[/]"
        )
