"""`agentq workflow run FILE --input JSON`: a workflow tool run on its own; and the
workflow files `agentq catalog publish --workflows DIR` reads.

The workflow runs exactly as it does as a tool of a run, durably, each node a job: as
the one call of a one-step run whose scripted model calls it with the input (so the
run's events show its nodes, and `agentq events RUN` replays them). The command prints
the output node's value as JSON; a failing node exits 1 with its error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agentq.cli.errors import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    check_redis_url,
    guarded,
    load_settings,
    spec_error,
)
from agentq.cli.options import redis_option, timeout_option, tools_option

if TYPE_CHECKING:
    from agentq.orchestrator.runs.result import RunResult
    from agentq.orchestrator.tools.workflow_catalogue import WorkflowDefinition

# The call id of the workflow's one call in its run.
CALL_ID = "workflow"


def standalone_spec(entry: dict[str, Any], tool_input: Any) -> dict[str, Any]:
    """A one-step run whose only call is the workflow with `tool_input`."""
    call = {"name": entry["name"], "input": tool_input, "id": CALL_ID}
    return {
        "model": {"provider": "scripted", "script": [{"tool_calls": [call]}]},
        "prompt": f"run the workflow {entry['name']}",
        "tools": [entry],
        "max_steps": 1,
        "metadata": {"workflow": entry["name"]},
    }


def _read_workflow(path: str) -> dict[str, Any]:
    from pydantic import ValidationError

    from agentq.orchestrator.core.errors import SpecError
    from agentq.orchestrator.tools.workflow import WorkflowToolSpec

    try:
        entry = json.loads(Path(path).read_text())
    except OSError as exc:
        raise SpecError(f"cannot read workflow {path!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise SpecError(f"workflow {path!r} is not valid JSON: {exc}") from None
    if not isinstance(entry, dict):
        raise SpecError(f"workflow {path!r} must be a JSON object (a workflow tool)")
    entry.setdefault("type", "workflow")
    try:
        parsed = WorkflowToolSpec.model_validate(entry)
    except ValidationError as exc:
        raise SpecError(f"workflow {path!r}: {spec_error(exc)}") from None
    # A published workflow named by reference is called by its own name.
    return {**entry, "name": parsed.name or parsed.workflow}


def read_definitions(folder: str) -> list[WorkflowDefinition]:
    """The workflows of a folder: each `*.json` file one definition (the file of a
    workflow tool, `type` optional), named by its `name` or else its file's stem; a
    SpecError naming the file (or a name two files claim)."""
    from pydantic import ValidationError

    from agentq.orchestrator.core.errors import SpecError
    from agentq.orchestrator.tools.workflow_catalogue import WorkflowDefinition

    root = Path(folder)
    if not root.is_dir():
        raise SpecError(f"--workflows {folder!r} is not a folder")
    found: dict[str, WorkflowDefinition] = {}
    for path in sorted(root.glob("*.json")):
        try:
            body = json.loads(path.read_text())
        except OSError as exc:
            raise SpecError(f"cannot read workflow {str(path)!r}: {exc.strerror}") from None
        except ValueError as exc:
            raise SpecError(f"workflow {str(path)!r} is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise SpecError(f"workflow {str(path)!r} must be a JSON object")
        if body.get("type") == "workflow":  # a workflow tool's file (`agentq workflow run`)
            del body["type"]
        try:
            definition = WorkflowDefinition.model_validate({"name": path.stem, **body})
        except ValidationError as exc:
            raise SpecError(f"workflow {str(path)!r}: {spec_error(exc)}") from None
        if definition.name in found:
            raise SpecError(f"two files of {folder!r} define the workflow {definition.name!r}")
        found[definition.name] = definition
    if not found:
        raise SpecError(f"--workflows {folder!r} holds no *.json workflow")
    return list(found.values())


def _read_input(text: str) -> Any:
    from agentq.orchestrator.core.errors import SpecError

    try:
        return json.loads(text)
    except ValueError as exc:
        raise SpecError(f"--input is not valid JSON: {exc}") from None


@click.group()
def workflow() -> None:
    """Workflow tools (graphs of nodes, each a job)."""


@workflow.command("run")
@click.argument("path", metavar="FILE")
@click.option("--input", "input_json", default="{}", metavar="JSON", help="The workflow's input.")
@redis_option("A shared Redis whose workers run the nodes (default: embedded, in this process).")
@tools_option("Module or .py file of @tool functions its tool nodes use (embedded); repeatable.")
@timeout_option("Give up after S seconds (exit 4).")
def run_workflow(
    path: str,
    input_json: str,
    redis_url: str | None,
    tool_modules: Sequence[str],
    timeout_s: float | None,
) -> None:
    """Run the workflow tool in FILE with --input and print its output as JSON."""
    result = guarded(_run)(path, input_json, redis_url, tool_modules, timeout_s)
    answer = (
        result.steps[0].tool_results[0] if result.steps and result.steps[0].tool_results else None
    )
    if not result.succeeded or answer is None:
        why = result.error.message if result.error else f"the run {result.id} {result.status}"
        click.echo(f"error: {why}", err=True)
        sys.exit(EXIT_RUN_FAILED)
    if answer.is_error:
        click.echo(f"error: {answer.output}", err=True)
        sys.exit(EXIT_RUN_FAILED)
    click.echo(json.dumps(answer.output, indent=2, ensure_ascii=False))
    sys.exit(EXIT_OK)


async def _run(
    path: str,
    input_json: str,
    redis_url: str | None,
    tool_modules: Sequence[str],
    timeout_s: float | None,
) -> RunResult:
    from agentq.orchestrator.client import Client
    from agentq.orchestrator.redis.connect import is_memory_url
    from agentq.workers.worker.embedded import embedded
    from agentq.workers.worker.loading import load_tool_modules

    settings = load_settings()
    tools = load_tool_modules(tool_modules)
    spec = standalone_spec(_read_workflow(path), _read_input(input_json))
    if redis_url:
        check_redis_url(redis_url)
    if redis_url and not is_memory_url(redis_url) and not tool_modules:
        async with Client(redis_url, settings=settings) as client:
            return await client.runs.wait(await client.runs.submit(spec), timeout_s=timeout_s)
    async with embedded(tools=tools, redis_url=redis_url, settings=settings) as client:
        return await client.runs.wait(await client.runs.submit(spec), timeout_s=timeout_s)
