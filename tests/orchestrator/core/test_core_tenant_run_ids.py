"""A chosen run id lives in its tenant's namespace (core/run_ids.py: tenant_run_id)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentq.orchestrator.core.run_ids import DEFAULT_TENANT, TENANT_RUN_ID, tenant_run_id
from agentq.orchestrator.spec.run import RUN_ID, RunSpec
from agentq.orchestrator.tools.base import STORED_SPEC

pytestmark = pytest.mark.unit


def test_a_tenants_ids_are_its_own_and_the_default_tenants_are_as_given() -> None:
    assert tenant_run_id(None, "job-1") == tenant_run_id(DEFAULT_TENANT, "job-1") == "job-1"
    acme, globex = tenant_run_id("acme", "job-1"), tenant_run_id("globex", "job-1")
    assert acme != globex
    assert acme == tenant_run_id("acme", "job-1")
    for run_id in (acme, globex):
        assert TENANT_RUN_ID.match(run_id)
        assert RUN_ID.match(run_id)
        assert run_id.endswith(".job-1")


def test_no_spec_chooses_an_id_in_a_tenants_namespace() -> None:
    spec = {"model": "openai:gpt-4o-mini", "prompt": "hi", "id": tenant_run_id("acme", "job-1")}
    with pytest.raises(ValidationError, match="tenants' namespaces"):
        RunSpec.model_validate(spec)
    assert RunSpec.model_validate(spec, context=STORED_SPEC).id == spec["id"]
