"""The README and every docs page, executed: a page that stops working fails the suite.

Pages: README.md, then every docs/**/*.md in path order. Convention (also stated in
CONTRIBUTING.md). A fenced block's info string is its language and optional tags:

    python            runs: `python FILE`, from the repository root
    python norun      shown only (a fragment that cannot run alone)
    bash runnable     runs: `bash -euo pipefail`, from the repository root
    bash              shown only (installation; commands that need a run in a given state)
    json spec         must validate as a RunSpec
    json mcp          must load as an mcpServers file
    json, (none)      shown only (json must still parse)
    console, yaml, ts shown only (a terminal session, a configuration excerpt, browser code)
    text              shown only (a diagram, a usage line)

Runnable blocks run page by page, each page's in its order (a block may rely on an earlier
block of its own page, never on another page's), against one real redis-server started here
(`AGENTQ_REDIS_URL`) with one `agentq worker --tools examples/quickstart_tools.py`
on it, and `agentq` on PATH as this tree's CLI. `test_block_census` prints how many
blocks of each kind there are and fails on an unknown tag.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentq.orchestrator.spec.run import RunSpec
from tests.support.infra import REPO, RedisServer, WorkerProcess

pytestmark = pytest.mark.e2e

README = REPO / "README.md"
DOCS = REPO / "docs"
KNOWN = {
    "python",
    "python norun",
    "bash",
    "bash runnable",
    "json",
    "json spec",
    "json mcp",
    "console",
    "yaml",
    "ts",
    "text",
    "",
}
FENCE = re.compile(r"^```(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    kind: str  # the fence's info string, normalised
    page: str  # the file, relative to the repository root
    line: int  # where the block starts in it
    heading: str
    text: str

    @property
    def id(self) -> str:
        page = re.sub(r"[^a-z0-9]+", "-", self.page.lower().removesuffix(".md")).strip("-")
        heading = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")
        return f"{page}-L{self.line}-{heading}"

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line} ({self.heading})"


def pages() -> list[Path]:
    """README.md first, then the docs pages in path order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks() -> list[Block]:
    return [block for page in pages() for block in page_blocks(page)]


def page_blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    heading = ""
    page = path.relative_to(REPO).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#") and not line.startswith("#!"):
            heading = line.lstrip("#").strip()
        match = FENCE.match(line)
        if match:
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and lines[i] != "```":
                body.append(lines[i])
                i += 1
            kind = " ".join(match.group("info").split())
            found.append(Block(kind, page, start + 1, heading, "\n".join(body) + "\n"))
        i += 1
    return found


ALL = blocks()


def of_kind(*kinds: str) -> list[Block]:
    return [b for b in ALL if b.kind in kinds]


def test_block_census() -> None:
    census = Counter(b.kind or "(plain)" for b in ALL)
    print("README and docs blocks:", ", ".join(f"{k}: {n}" for k, n in sorted(census.items())))
    unknown = [f"{b.page} line {b.line}: {b.kind!r}" for b in ALL if b.kind not in KNOWN]
    assert not unknown, f"unknown fence tags (see this file's docstring): {unknown}"
    assert census["python"] >= 3
    assert census["bash runnable"] >= 1
    assert {b.page for b in ALL if b.kind in ("python", "bash runnable")} > {"README.md"}


@pytest.mark.parametrize("block", of_kind("json", "json spec", "json mcp"), ids=lambda b: b.id)
def test_json_blocks_are_valid(block: Block, tmp_path: Path) -> None:
    data = json.loads(block.text)
    if block.kind == "json spec":
        RunSpec.model_validate(data)
    if block.kind == "json mcp":
        from agentq.workers.tools.mcp import load_mcp_config

        path = tmp_path / "mcp.json"
        path.write_text(block.text)
        load_mcp_config(str(path))


@pytest.fixture(scope="module")
def shell_env() -> Iterator[dict[str, str]]:
    server = RedisServer()
    worker = WorkerProcess(server.url, "--tools", "examples/quickstart_tools.py")
    bin_dir = Path(tempfile.mkdtemp(prefix="agentq-bin-"))
    shim = bin_dir / "agentq"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m agentq "$@"\n')
    shim.chmod(0o755)
    try:
        deadline = time.monotonic() + 30
        while "agentq worker" not in worker.log():
            assert worker.proc.poll() is None, worker.log()
            assert time.monotonic() < deadline, worker.log()
            time.sleep(0.05)
        yield {
            **os.environ,
            "AGENTQ_REDIS_URL": server.url,
            "PYTHONPATH": str(REPO),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    finally:
        worker.stop()
        server.stop()


def run_block(args: list[str], env: dict[str, str], block: Block) -> None:
    done = subprocess.run(
        args, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, (
        f"{block.where} exited {done.returncode}\n"
        f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("block", of_kind("python"), ids=lambda b: b.id)
def test_python_blocks_run(block: Block, shell_env: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / f"block_{block.line}.py"
    script.write_text(block.text)
    run_block([sys.executable, str(script)], shell_env, block)


@pytest.mark.parametrize("block", of_kind("bash runnable"), ids=lambda b: b.id)
def test_runnable_bash_blocks_run(block: Block, shell_env: dict[str, str]) -> None:
    run_block(["bash", "-euo", "pipefail", "-c", block.text], shell_env, block)
