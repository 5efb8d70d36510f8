"""Every AGENTQ_* variable the code reads is known to the unknown-variable warning."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from agentq.cli.environment import (
    DEPLOYMENT_PREFIXES,
    SERVE_LIMITS,
    known_variables,
    unknown_variable_warnings,
)
from agentq.orchestrator.core.settings import Settings
from agentq.serve.config import Limits
from tests.support.infra import REPO

pytestmark = pytest.mark.unit

KNOWN = known_variables(Settings.model_fields)
# Names that look like variables but are constants of the code.
NOT_VARIABLES = {"AGENTQ_UID", "AGENTQ_OPTIONS", "AGENTQ_SERVE_"}


def test_every_variable_the_code_reads_is_known() -> None:
    named: set[str] = set()
    for root in ("agentq", "orchestrator", "workers", "sandbox"):
        for path in (REPO / root).rglob("*.py"):
            if path.is_symlink() or "agentq/orchestrator" in str(path):
                continue
            named |= set(re.findall(r"(?<![A-Z_])AGENTQ_[A-Z0-9_]+", Path(path).read_text()))
    unknown = {n for n in named - NOT_VARIABLES - KNOWN if not n.startswith(DEPLOYMENT_PREFIXES)}
    assert sorted(unknown) == []


def test_the_serve_limits_named_are_the_serve_limits() -> None:
    assert set(SERVE_LIMITS) == {f.name for f in dataclasses.fields(Limits)}


def test_every_variable_the_deployment_files_and_the_guide_name_is_known() -> None:
    """What compose, the CI scripts, the chart and the docs' examples set lives in the same
    environment as agentq's own variables: none of it may be warned about."""
    named: set[str] = set()
    paths = [REPO / "docker-compose.yml", REPO / "README.md"]
    for root, pattern in ((".ci", "*"), ("helm", "*.yaml"), ("docs", "*.md")):
        paths += [p for p in (REPO / root).rglob(pattern) if p.is_file()]
    for path in paths:
        named |= set(re.findall(r"(?<![A-Z_])AGENTQ_[A-Z0-9_]+", path.read_text(errors="replace")))
    warned = unknown_variable_warnings(dict.fromkeys(named - NOT_VARIABLES, "x"), KNOWN)
    assert [line for line in warned if "AGENTQ_CONCURENCY" not in line] == []


def test_only_unknown_names_are_warned_about() -> None:
    environ = {"AGENTQ_REDIS_URL": "x", "AGENTQ_DEBUG": "1", "AGENTQ_LEASES": "3", "HOME": "/"}
    assert unknown_variable_warnings(environ, KNOWN) == [
        "warning: AGENTQ_LEASES is not a variable agentq reads: it is ignored "
        "(did you mean AGENTQ_LEASE_S?)"
    ]
