"""`agentq -h` stays light: the CLI's modules import click and the standard library at
their top and everything else inside the commands (checked by what a fresh interpreter
has loaded, never by a timing). Two option defaults are written out for that reason;
they must stay equal to the constants they stand for."""

from __future__ import annotations

import json
import subprocess
import sys

from agentq.cli.batch import submit as batch_submit
from agentq.cli.main import catalog_publish
from agentq.orchestrator.batches.state import DEFAULT_BATCH_CONCURRENCY
from agentq.orchestrator.core.envelopes import TOOLS_QUEUE

HEAVY = ("pydantic", "redis", "rich", "httpx", "fakeredis", "agentq.orchestrator.client")


def test_help_loads_nothing_heavy() -> None:
    probe = (
        "import json, sys\n"
        "from agentq.cli.main import main\n"
        "try:\n"
        "    main(['-h'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert "Commands:" in done.stdout
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == []


def _default(command: object, name: str) -> object:
    return next(p.default for p in command.params if p.name == name)  # type: ignore[attr-defined]


def test_written_out_defaults_match_their_constants() -> None:
    assert _default(catalog_publish, "tool_queue") == TOOLS_QUEUE
    assert _default(batch_submit, "concurrency") == DEFAULT_BATCH_CONCURRENCY
