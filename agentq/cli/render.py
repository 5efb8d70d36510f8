"""What the CLI shows people: a run's live progress, its status, runs and workers.

Readable on light and dark terminals (the terminal's own foreground for text,
a few standard colours for marks), never hard-wrapped when piped, and every
piece of user-provided text (model names, tool names, outputs, messages)
escaped, so that `[x]` stays `[x]` and `:x:` never becomes an emoji.
"""

from __future__ import annotations

import json
import time
from typing import Any

from rich.console import Console
from rich.markup import escape

from agentq.orchestrator.core.events import Event
from agentq.orchestrator.fleet.listings import WorkerRecord
from agentq.orchestrator.runs.index import RunSummary
from agentq.orchestrator.runs.result import RunResult


def make_console(*, stderr: bool = False, quiet: bool = False) -> Console:
    return Console(stderr=stderr, quiet=quiet, highlight=False, emoji=False, soft_wrap=True)


def short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _e(value: Any) -> str:
    return escape(str(value))


class ProgressPrinter:
    """Prints events as they come. A step's text shows once: the deltas of an attempt
    that a later attempt of the same step replaced are dropped. Reasoning the model
    shows streams dimmed, on its own lines apart from the answer."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._streaming: str | None = None  # the delta type being printed on this line
        self._attempts: dict[int, int] = {}  # step -> latest attempt seen
        self._printed_text: set[int] = set()  # steps whose text is on screen

    def _end_text(self) -> None:
        if self._streaming is not None:
            self.console.print()
            self._streaming = None

    def _call(self, event: Event) -> str:
        if not event.tool_call_id:
            return ""
        return f"{_e(event.tool_name)}[dim]#{_e(event.tool_call_id)}[/]"

    def show(self, event: Event) -> None:
        fields = event.model_extra or {}
        kind = event.type
        step = event.step if event.step is not None else -1
        if kind in ("text-delta", "reasoning-delta"):
            attempt = int(fields.get("attempt") or 1)
            if attempt < self._attempts.get(step, attempt):
                return  # an abandoned attempt's text
            self._attempts[step] = attempt
            if self._streaming != kind:
                self._end_text()
            delta = _e(fields.get("delta", ""))
            self.console.print(
                f"[dim]{delta}[/]" if kind == "reasoning-delta" else delta, end="", markup=True
            )
            self._streaming = kind
            self._printed_text.add(step)
            return
        self._end_text()
        call = self._call(event)
        if kind == "start":
            model = str(fields.get("model", ""))
            note = (
                "  [dim](scripted: no model is called)[/]" if model.startswith("scripted") else ""
            )
            self.console.print(f"[bold]run[/] {_e(event.run_id)}  model {_e(model)}{note}")
        elif kind == "start-step":
            attempt = int(fields.get("attempt") or 1)
            self._attempts[step] = max(attempt, self._attempts.get(step, 1))
            retry = ""
            if attempt > 1:
                retry = " [magenta](attempt " + str(attempt) + ": its worker stopped"
                retry += (
                    "; the text above is discarded)[/]" if step in self._printed_text else ")[/]"
                )
            self.console.print(f"[bold cyan]── step {step}[/]{retry}")
        elif kind == "model-retry":
            self.console.print(
                f"  [magenta]retrying after {_e(fields.get('reason'))} in "
                f"{float(fields.get('delay_s') or 0):.1f} s "
                f"(attempt {fields.get('attempt')}/{fields.get('max_attempts')})[/]"
            )
        elif kind == "tool-call":
            self.console.print(f"  [blue]→[/] {call}({_e(short(fields.get('input')))})")
        elif kind == "tool-call-repair":
            outcome = "repaired" if fields.get("repaired") else "could not be repaired"
            self.console.print(
                f"  [magenta]⟳ {call} had invalid input ({_e(short(fields.get('error'), 120))}): "
                f"{outcome}[/]"
            )
        elif kind == "tool-running":
            attempt = int(fields.get("attempt") or 1)
            if attempt > 1:
                self.console.print(f"  [dim]… {call} running again (attempt {attempt})[/]")
        elif kind == "tool-approval-request":
            self.console.print(f"  [bold magenta]?[/] {call} waits for approval")
        elif kind == "tool-approval-response":
            verdict = "approved" if fields.get("approved") else "denied"
            self.console.print(f"    {call} {verdict}")
        elif kind == "tool-input-request":
            self.console.print(
                f"  [bold magenta]?[/] {call} asks: {_e(short(fields.get('message')))} "
                f"[dim](request {_e(fields.get('request_id'))})[/]"
            )
        elif kind == "tool-input-response":
            self.console.print(f"    {call} {_e(fields.get('outcome', 'answered'))}")
        elif kind == "tool-progress":
            self.console.print(f"  [dim]… {call} {_e(short(fields.get('output')))}[/]")
        elif kind == "tool-result":
            self.console.print(f"  [green]←[/] {call} {_e(short(fields.get('output')))}")
        elif kind == "tool-error":
            self.console.print(f"  [red]✗[/] {call} {_e(short(fields.get('error')))}")
        elif kind == "finish-step":
            usage = fields.get("usage") or {}
            self.console.print(
                f"  [dim]step {step} done: {_e(fields.get('finish_reason'))}, "
                f"{usage.get('total_tokens', 0)} tokens[/]"
            )
        elif kind == "context-compacted":
            self.console.print(
                f"  [dim]context compacted ({_e(fields.get('strategy'))}): "
                f"{fields.get('before_tokens')} → {fields.get('after_tokens')} tokens[/]"
            )
        elif kind == "finish":
            self.console.print("[bold green]✓ finished[/]")
        elif kind == "error":
            error = fields.get("error") or {}
            message = error.get("message", error) if isinstance(error, dict) else error
            self.console.print(f"[bold red]✗ failed:[/] {_e(message)}")
        elif kind == "abort":
            reason = fields.get("reason")
            self.console.print(f"[bold]⊘ cancelled[/]{': ' + _e(reason) if reason else ''}")

    def note(self, message: str) -> None:
        """A line from the CLI itself (what it waits for), dim, between events."""
        self._end_text()
        self.console.print(f"[dim]{_e(message)}[/]")

    def summary(self, result: RunResult) -> None:
        self._end_text()
        if result.text:
            self.console.print()
            self.console.print("[bold]Answer:[/]", _e(result.text))
        u = result.usage
        self.console.print(
            f"[dim]{result.status}: {len(result.steps)} steps, "
            f"{u.input_tokens} in / {u.output_tokens} out tokens[/]"
        )


def waits_for(item: dict[str, Any]) -> str:
    status = str(item.get("status", ""))
    if status == "awaiting-input":
        return "an answer"
    if "approval" in status:
        return "approval"
    return "a result"


def how_to_answer(run_id: str, item: dict[str, Any]) -> str:
    if item.get("status") == "awaiting-input":
        return f"agentq answer {run_id} {item['request_id']} --json '{{...}}'  (or --decline)"
    call = item.get("tool_call_id", "")
    if "approval" in str(item.get("status", "")):
        return f"agentq approve {run_id} {call}  (or --deny --reason '...')"
    return f"agentq tool-result {run_id} {call} --output 'JSON'  (--error for a failure)"


def pending_line(run_id: str, item: dict[str, Any]) -> str:
    if item.get("status") == "awaiting-input":
        what = f"request {item.get('request_id')} of {item.get('tool_name')}"
        asks = f": {short(item.get('message'), 80)}" if item.get("message") else ""
    else:
        what = f"call {item.get('tool_call_id')} {item.get('tool_name')}"
        asks = f"({short(item.get('input'), 80)})"
    return f"step {item.get('step')}  {what}{asks} waits for {waits_for(item)}"


def print_status(console: Console, result: RunResult, step: int) -> None:
    console.print(f"[bold]run[/] {_e(result.id)}  status [bold]{_e(result.status)}[/]  step {step}")
    u = result.usage
    console.print(f"  {len(result.steps)} steps done, {u.input_tokens} in / {u.output_tokens} out")
    for item in result.pending:
        console.print(f"  [magenta]waiting:[/] {_e(pending_line(result.id, item))}")
        console.print(f"    [dim]answer with: {_e(how_to_answer(result.id, item))}[/]")
    if result.error:
        console.print(f"  [red]error:[/] {_e(result.error.message)}")
    if result.text and result.status == "succeeded":
        console.print(f"  answer: {_e(short(result.text, 500))}")


def _ago(at: float, now: float) -> str:
    seconds = max(0.0, now - at)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} d ago"


def _table(console: Console, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    console.print(f"[bold]{_e(line(header))}[/]")
    for row in rows:
        console.print(_e(line(row)))


def print_runs(console: Console, runs: list[RunSummary]) -> None:
    if not runs:
        console.print("[dim]no runs[/]")
        return
    now = time.time()
    rows = [[r.id, r.status, str(r.step), r.model, _ago(r.created_at, now)] for r in runs]
    _table(console, ["RUN", "STATUS", "STEP", "MODEL", "SUBMITTED"], rows)


def print_workers(console: Console, workers: list[WorkerRecord]) -> None:
    if not workers:
        console.print("[dim]no live workers (start one with `agentq worker`)[/]")
        return
    now = time.time()
    rows = [
        [
            w.host,
            str(w.pid),
            ",".join(w.queues),
            ",".join(w.tools) or "-",
            str(w.concurrency),
            _ago(w.seen_at, now),
        ]
        for w in workers
    ]
    _table(console, ["HOST", "PID", "QUEUES", "TOOLS", "CONCURRENCY", "LAST SEEN"], rows)
