"""The layering of DESIGN.md, enforced on every import statement of the product.

- orchestrator never imports workers or sandbox;
- sandbox imports nothing of agentq but itself;
- providers never import the run store (a wire format knows nothing of runs);
- nothing, product or test, imports the folders by their bare top-level names: the
  installed wheel only has `agentq.*`, and a bare import would load a module twice;
- each package (a folder of modules) imports, at module level, only the packages the
  table below allows it, and no two packages import each other, however indirectly.
  A new dependency is a deliberate edit of the table. Imports inside functions load
  heavy or optional parts on demand (the CLI, Docker, MCP, fakeredis); imports under
  `TYPE_CHECKING` only name types.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.infra import REPO

pytestmark = pytest.mark.unit

ROOT = REPO
PRODUCT = ("agentq", "orchestrator", "workers", "sandbox")


def _python_files(*folders: str) -> Iterator[Path]:
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            if "node_modules" not in path.parts:
                yield path


def _imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _violations(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in _python_files(folder):
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("orchestrator", ("agentq.workers", "agentq.sandbox", "agentq.cli", "agentq.serve")),
        ("sandbox", ("agentq.orchestrator", "agentq.workers", "agentq.cli", "agentq.serve")),
        ("workers/models", ("agentq.orchestrator.runs.store",)),
    ],
)
def test_layering(folder: str, forbidden: tuple[str, ...]) -> None:
    assert _violations(folder, forbidden) == []


def test_no_bare_top_level_imports() -> None:
    bare = ("orchestrator", "workers", "sandbox")
    found = []
    for path in _python_files(*PRODUCT, "tests", "bench", "examples"):
        for name in _imports(path):
            if name.split(".")[0] in bare:
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    assert found == []


# What each package may import (besides itself and its subpackages' parents): the layers
# read bottom up as core < redis, policy < machine, tools < spec, runs.state < loop <
# tracing, runs < calls, batches, fleet < the client < the doors and the workers.
ALLOWED: dict[str, set[str]] = {
    "agentq": {"cli", "orchestrator.tracing"},
    "cli": {
        "orchestrator",
        "orchestrator.core",
        "orchestrator.fleet",
        "orchestrator.runs",
        "sandbox",
    },
    "serve": {
        "orchestrator",
        "orchestrator.batches",
        "orchestrator.budgets",  # a budget's body (SharedBudget)
        "orchestrator.calls",
        "orchestrator.core",
        "orchestrator.fleet",
        "orchestrator.loop",  # the replay report `client.runs.replay` answers, as the schema
        # the one Redis error mapper: a Redis error no sub-client mapped is still a 503
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.schedules",  # the schedules API's models (ScheduleInfo, TickRecord)
        "orchestrator.spec",
        "orchestrator.threads",
        "orchestrator.tracing",  # the doors' spans, and the process's tracing set up
        # The config holds the deployment's remote tools, read before serving.
        "orchestrator.tools",
        "workers.tools",
    },
    # The chat door is a router the app mounts in a function; it stands on the rest of serve.
    "serve.chat": {
        "orchestrator",
        "orchestrator.core",
        "orchestrator.runs",
        "orchestrator.spec",
        "serve",
    },
    # The console's routes (queue depths over time, a tenant's concurrency keys), mounted
    # as the chat door is.
    "serve.console": {"orchestrator.concurrency", "orchestrator.fleet", "serve"},
    "orchestrator": {
        "orchestrator.batches",
        "orchestrator.calls",
        "orchestrator.core",
        "orchestrator.fleet",
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.threads",
        "orchestrator.schedules",
    },
    "orchestrator.core": set(),
    "orchestrator.redis": {"orchestrator.core"},
    "orchestrator.policy": {"orchestrator.core"},
    "orchestrator.machine": {"orchestrator.core", "orchestrator.redis"},
    "orchestrator.tools": {"orchestrator.core", "orchestrator.policy"},
    "orchestrator.output": {"orchestrator.core"},
    "orchestrator.cost": {"orchestrator.core"},
    # Shared budgets: their limits and spend as Redis keeps them (the run transitions
    # write the spend; the runs' sub-client raises them).
    "orchestrator.budgets": {"orchestrator.core", "orchestrator.machine", "orchestrator.redis"},
    "orchestrator.spec": {
        "orchestrator.concurrency",  # a spec's `concurrency`
        "orchestrator.core",
        "orchestrator.output",
        "orchestrator.policy",
        "orchestrator.tools",
    },
    # A key's load is read from Redis (load.py), beside the spec half and its slots.
    "orchestrator.concurrency": {"orchestrator.core", "orchestrator.policy", "orchestrator.redis"},
    "orchestrator.runs.state": {
        "orchestrator.concurrency",  # a run's concurrency slot, stored at create
        "orchestrator.core",
        "orchestrator.machine",
    },
    "orchestrator.loop": {
        "orchestrator.core",
        "orchestrator.output",
        "orchestrator.policy",
        "orchestrator.runs.state",
        "orchestrator.spec",
        "orchestrator.tools",
    },
    "orchestrator.tracing": {"orchestrator.core"},
    "orchestrator.runs": {
        "orchestrator.budgets",  # a tenant's submit refused, a budget raised
        "orchestrator.concurrency",  # a run's key resolved, placed and stored at create
        "orchestrator.core",
        "orchestrator.loop",
        "orchestrator.output",
        "orchestrator.machine",
        "orchestrator.policy",
        "orchestrator.redis",
        "orchestrator.runs.state",
        "orchestrator.spec",
        "orchestrator.tools",
        "orchestrator.tracing",
    },
    "orchestrator.calls": {
        "orchestrator.core",
        "orchestrator.loop",
        "orchestrator.machine",
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.runs.state",
        "orchestrator.spec",
        "orchestrator.tools",
        "orchestrator.tracing",
    },
    "orchestrator.batches": {
        "orchestrator.budgets",  # a batch's budget, set at submit and raised
        "orchestrator.core",
        "orchestrator.cost",  # the saving of batch-priced steps, at the price table
        "orchestrator.machine",
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.runs.state",
        "orchestrator.spec",
    },
    # Threads stand above runs: a thread's turn is judged on its runs (runs name threads
    # by a protocol only, runs/turns.py).
    "orchestrator.threads": {
        "orchestrator.core",
        "orchestrator.loop",
        "orchestrator.machine",
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.spec",
    },
    # A tick creates a run and reads the previous one's status through `Runs`.
    "orchestrator.schedules": {
        "orchestrator.core",
        "orchestrator.machine",
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.runs.state",
        "orchestrator.spec",
    },
    "orchestrator.fleet": {
        "orchestrator.core",
        "orchestrator.machine",
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.tools",
    },
    "sandbox": set(),
    "workers.queue": {
        "orchestrator.concurrency",  # the claim's concurrency keys (its Lua constants)
        "orchestrator.core",
        "orchestrator.machine",
        "orchestrator.redis",
        "orchestrator.runs.state",  # the claim reads whether a job's run has ended (its status)
    },
    "workers.models": {
        "orchestrator.core",
        "orchestrator.cost",  # pricing an answer's usage
        "orchestrator.machine",
        "orchestrator.output",
        "orchestrator.policy",
        "orchestrator.spec",
    },
    "workers.models.batch": {
        "orchestrator.core",
        "orchestrator.machine",
        "orchestrator.policy",
        "orchestrator.redis",
        "orchestrator.runs.state",
        "workers.models",
        "workers.queue",
    },
    "workers.models.gemini_cache": {
        "orchestrator.batches",  # batches/state.py: whether the batch runs
        "orchestrator.core",
        "orchestrator.machine",
        "orchestrator.policy",
        "workers.models",
    },
    "workers.tools": {
        "orchestrator",
        "orchestrator.calls",
        "orchestrator.core",
        "orchestrator.loop",
        "orchestrator.machine",
        "orchestrator.output",
        "orchestrator.policy",
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.runs.state",
        "orchestrator.spec",
        "orchestrator.tools",
        "orchestrator.tracing",
        "sandbox",
        "workers.models",
        "workers.queue",
    },
    "workers.tools.mcp": {
        "orchestrator.core",
        "orchestrator.policy",
        "orchestrator.tools",
        "workers.models",
        "workers.tools",
    },
    "workers.steps": {
        "orchestrator.budgets",  # a step held by its batch's or tenant's budget
        "orchestrator.core",
        "orchestrator.loop",
        "orchestrator.output",
        "orchestrator.machine",
        "orchestrator.policy",  # policy/stop_conditions.py: what a step's hooks are asked
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.runs.state",
        "orchestrator.spec",
        "orchestrator.tools",
        "orchestrator.tracing",
        "workers.models",
        "workers.models.batch",
        "workers.models.gemini_cache",  # a batch line's cached content
        "workers.queue",  # queue/outcome.py: a step reports that it failed its run
        "workers.tools",
    },
    "workers.jobs": {
        "orchestrator",
        "orchestrator.batches",
        "orchestrator.budgets",  # the shared budgets' ledger a step reads
        "orchestrator.calls",
        "orchestrator.core",
        "orchestrator.loop",
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.runs.state",
        "orchestrator.spec",
        "orchestrator.tools",
        "orchestrator.tracing",
        "workers.models",
        "workers.models.batch",
        "workers.models.gemini_cache",  # a batch's end deletes its cached contents
        "workers.queue",
        "workers.steps",
        "workers.tools",
    },
    "workers.worker": {
        "orchestrator",
        "orchestrator.batches",  # the sweeper of lost admission jobs, beside the runs'
        "orchestrator.budgets",  # AGENTQ_TENANT_BUDGETS checked at start
        "orchestrator.calls",  # the sweeper of calls whose job was lost, beside the runs'
        "orchestrator.core",
        "orchestrator.cost",  # the price table, read at the start
        "orchestrator.fleet",
        "orchestrator.loop",
        "orchestrator.machine",
        "orchestrator.policy",
        "orchestrator.redis",
        "orchestrator.runs",
        "orchestrator.runs.state",
        "orchestrator.spec",
        "orchestrator.tools",
        "orchestrator.tracing",
        "workers.jobs",
        "workers.models",
        "workers.models.batch",
        "workers.queue",
        "workers.steps",
        "workers.tools",
    },
}
TOPS = ("orchestrator", "workers", "sandbox")


def _package_of_file(path: Path) -> str:
    parts = path.relative_to(ROOT).parts[:-1]
    return ".".join(parts[1:] if parts[0] == "agentq" else parts) or "agentq"


def _package_of_module(module: str) -> str:
    """The folder a module `agentq.…` lives in, as `orchestrator.runs` etc."""
    parts = module.split(".")[1:]
    top, rest = (parts[0], parts[1:]) if parts and parts[0] in TOPS else ("", parts)
    folder = ROOT / top if top else ROOT / "agentq"
    package = [top] if top else []
    for part in rest:
        if not (folder / part).is_dir():
            break
        folder = folder / part
        package.append(part)
    return ".".join(package) or "agentq"


def _package_imports() -> dict[str, set[str]]:
    """Package → the packages its modules import at module level (not in functions, not
    under TYPE_CHECKING)."""
    edges: dict[str, set[str]] = {}
    files = [p for top in TOPS for p in _python_files(top)] + [
        p for p in _python_files("agentq") if p.relative_to(ROOT).parts[1] not in TOPS
    ]
    for path in files:
        source = _package_of_file(path)
        for node in ast.parse(path.read_text()).body:
            if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                continue
            if node.module.split(".")[0] != "agentq":
                continue
            for alias in node.names:
                target = _package_of_module(f"{node.module}.{alias.name}")
                if target != source:
                    edges.setdefault(source, set()).add(target)
    return edges


def test_each_package_imports_only_what_it_may() -> None:
    found = _package_imports()
    extra = {pkg: sorted(found[pkg] - ALLOWED.get(pkg, set())) for pkg in found}
    assert {pkg: deps for pkg, deps in extra.items() if deps} == {}


def test_no_import_cycle_between_packages() -> None:
    edges = _package_imports()
    seen: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(package: str, path: list[str]) -> None:
        seen[package] = 1
        for target in sorted(edges.get(package, ())):
            if seen.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in seen:
                visit(target, [*path, target])
        seen[package] = 2

    for package in sorted(edges):
        if package not in seen:
            visit(package, [package])
    assert cycles == []
