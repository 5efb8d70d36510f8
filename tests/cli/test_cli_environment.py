"""Every AGENTQ_* variable the code reads is known to the unknown-variable warning."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentq.cli.environment import known_variables, unknown_variable_warnings
from agentq.orchestrator.core.settings import Settings
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
    assert sorted(named - NOT_VARIABLES - KNOWN) == []


def test_only_unknown_names_are_warned_about() -> None:
    environ = {"AGENTQ_REDIS_URL": "x", "AGENTQ_DEBUG": "1", "AGENTQ_LEASES": "3", "HOME": "/"}
    assert unknown_variable_warnings(environ, KNOWN) == [
        "warning: AGENTQ_LEASES is not a variable agentq reads: it is ignored "
        "(did you mean AGENTQ_LEASE_S?)"
    ]
