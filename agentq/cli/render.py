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

from agentq.orchestrator.core import events as ev
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


def _call(tool_name: str | None, call_id: str) -> str:
    return f"{_e(tool_name or '')}[dim]#{_e(call_id)}[/]"


def workflow_progress(output: Any) -> str | None:
    """A workflow call's progress (workers/tools/workflow.py) as a phrase: its graph's
    outline first (`workflow of 3 nodes: in, sum, out`), then each node's start and end
    (`node sum done: 5.0`). None: the progress is not a workflow's."""
    match output:
        case {"nodes": list(nodes), "edges": list()}:
            ids = [str(n.get("id")) for n in nodes if isinstance(n, dict)]
            return f"workflow of {len(ids)} nodes: {', '.join(ids)}"
        case {"node": str(node), "status": str(status), "error": error}:
            return f"node {node} {status}: {short(error, 120)}"
        case {"node": str(node), "status": str(status), "output": value}:
            return f"node {node} {status}: {short(value, 120)}"
        case {"node": str(node), "status": str(status)}:
            return f"node {node} {status}"
    return None


class ProgressPrinter:
    """Prints events as they come. A step's text shows once: the deltas of an attempt
    that a later attempt of the same step replaced are dropped. Reasoning the model
    shows streams dimmed, on its own lines apart from the answer."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._streaming: str | None = None  # the delta type being printed on this line
        self._attempts: dict[int, int] = {}  # step -> latest attempt seen
        self._printed_text: set[int] = set()  # steps whose text is on screen
        # call id -> tool name, for the events that name only the call
        self._tool_names: dict[str, str] = {}

    def _end_text(self) -> None:
        if self._streaming is not None:
            self.console.print()
            self._streaming = None

    def _delta(self, event: ev.TextDelta | ev.ReasoningDelta) -> None:
        if event.attempt < self._attempts.get(event.step, event.attempt):
            return  # an abandoned attempt's text
        self._attempts[event.step] = event.attempt
        if self._streaming != event.type:
            self._end_text()
        delta = _e(event.delta)
        reasoning = isinstance(event, ev.ReasoningDelta)
        self.console.print(f"[dim]{delta}[/]" if reasoning else delta, end="", markup=True)
        self._streaming = event.type
        self._printed_text.add(event.step)

    def show(self, event: Event) -> None:
        if isinstance(event, ev.TextDelta | ev.ReasoningDelta):
            self._delta(event)
            return
        self._end_text()
        line = self._line(event)
        if line is not None:
            self.console.print(line)

    def _line(self, event: Event) -> str | None:
        """The markup line an event shows as (None: it shows nothing)."""
        match event:
            case ev.Start(model=model):
                label = model or ""
                scripted = label.startswith("scripted")
                note = "  [dim](scripted: no model is called)[/]" if scripted else ""
                return f"[bold]run[/] {_e(event.run_id)}  model {_e(label)}{note}"
            case ev.StartStep(step=step, attempt=attempt):
                self._attempts[step] = max(attempt, self._attempts.get(step, 1))
                retry = ""
                if attempt > 1:
                    retry = " [magenta](attempt " + str(attempt) + ": its worker stopped"
                    retry += (
                        "; the text above is discarded)[/]"
                        if step in self._printed_text
                        else ")[/]"
                    )
                return f"[bold cyan]── step {step}[/]{retry}"
            case ev.ModelRetry():
                return (
                    f"  [magenta]retrying after {_e(event.reason)} in {event.delay_s:.1f} s "
                    f"(attempt {event.attempt}/{event.max_attempts})[/]"
                )
            case ev.ToolCall(tool_name=name, tool_call_id=call_id, input=input_):
                return f"  [blue]→[/] {_call(name, call_id)}({_e(short(input_))})"
            case ev.ToolCallRepair(tool_name=name, tool_call_id=call_id, error=error):
                outcome = "repaired" if event.repaired else "could not be repaired"
                return (
                    f"  [magenta]⟳ {_call(name, call_id)} had invalid input "
                    f"({_e(short(error, 120))}): {outcome}[/]"
                )
            case ev.ToolRunning(tool_name=name, tool_call_id=call_id, attempt=attempt):
                if attempt > 1:
                    return f"  [dim]… {_call(name, call_id)} running again (attempt {attempt})[/]"
                return None
            case ev.ToolApprovalRequest(tool_name=name, tool_call_id=call_id):
                return f"  [bold magenta]?[/] {_call(name, call_id)} waits for approval"
            case ev.ToolApprovalResponse(tool_name=name, tool_call_id=call_id, approved=approved):
                return f"    {_call(name, call_id)} {'approved' if approved else 'denied'}"
            case ev.ToolInputRequest(tool_name=name, tool_call_id=call_id):
                self._tool_names[call_id] = name
                return (
                    f"  [bold magenta]?[/] {_call(name, call_id)} asks: {_e(short(event.message))} "
                    f"[dim](request {_e(event.request_id)})[/]"
                )
            case ev.ToolInputResponse(tool_call_id=call_id, outcome=outcome):
                # The response names no tool: its request did.
                return f"    {_call(self._tool_names.get(call_id), call_id)} {_e(outcome)}"
            case ev.ToolProgress(tool_name=name, tool_call_id=call_id, output=output):
                shown = workflow_progress(output) or short(output)
                return f"  [dim]… {_call(name, call_id)} {_e(shown)}[/]"
            case ev.ToolResult(tool_name=name, tool_call_id=call_id, output=output):
                return f"  [green]←[/] {_call(name, call_id)} {_e(short(output))}"
            case ev.ToolError(tool_name=name, tool_call_id=call_id, error=error, kind=kind):
                shown = f"[dim]({_e(kind)})[/] " if kind is not None else ""
                return f"  [red]✗[/] {_call(name, call_id)} {shown}{_e(short(error))}"
            case ev.FinishStep(step=step, finish_reason=reason, usage=usage):
                return f"  [dim]step {step} done: {_e(reason)}, {usage.total_tokens} tokens[/]"
            case ev.ContextCompacted():
                return (
                    f"  [dim]context compacted ({_e(event.strategy)}): "
                    f"{event.before_tokens} → {event.after_tokens} tokens[/]"
                )
            case ev.Finish():
                return "[bold green]✓ finished[/]"
            case ev.Error(error=error):
                return f"[bold red]✗ failed:[/] {_e(error.get('message', error))}"
            case ev.Abort(reason=reason):
                return f"[bold]⊘ cancelled[/]{': ' + _e(reason) if reason else ''}"
            case _:
                return None

    def note(self, message: str) -> None:
        """A line from the CLI itself (what it waits for), dim, between events."""
        self._end_text()
        self.console.print(f"[dim]{_e(message)}[/]")

    def summary(self, result: RunResult) -> None:
        self._end_text()
        if result.text:
            self.console.print()
            self.console.print("[bold]Answer:[/]", _e(result.text))
        if result.output is not None:
            shown = json.dumps(result.output, ensure_ascii=False)
            self.console.print("[bold]Output:[/]", _e(shown))
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
    if result.concurrency is not None:
        c = result.concurrency
        console.print(f"  concurrency key {_e(c.key)}: at most {c.max} runs at once")
    for item in result.pending:
        console.print(f"  [magenta]waiting:[/] {_e(pending_line(result.id, item))}")
        console.print(f"    [dim]answer with: {_e(how_to_answer(result.id, item))}[/]")
    if result.error:
        console.print(f"  [red]error:[/] {_e(result.error.message)}")
    if result.text and result.status == "succeeded":
        console.print(f"  answer: {_e(short(result.text, 500))}")
    if result.output is not None:
        console.print(f"  output: {_e(short(json.dumps(result.output, ensure_ascii=False), 500))}")


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
            f"{w.jobs_in_flight}/{w.concurrency}",
            _ago(w.seen_at, now),
        ]
        for w in workers
    ]
    _table(console, ["HOST", "PID", "QUEUES", "TOOLS", "JOBS", "LAST SEEN"], rows)
