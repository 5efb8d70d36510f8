"""Which runs a list shows: `summarize` reads a run's meta hash, `RunFilter` judges it."""

from __future__ import annotations

import json

import pytest

from agentq.orchestrator.runs.index import RunFilter, RunSummary, summarize

pytestmark = pytest.mark.unit

FAILED = summarize(
    "n0123456789ab.order-7",
    {
        "status": "failed",
        "tenant": "acme",
        "spec": json.dumps(
            {
                "id": "order-7",
                "model": {"provider": "openai", "name": "gpt-4o-mini"},
                "metadata": {"team": "ops", "priority": 2},
            }
        ),
        "error": json.dumps({"type": "tool", "message": "boom", "step": 1}),
        "parent": json.dumps({"run_id": "mother", "step": 0, "call_id": "c1"}),
        "created_at": "100.5",
    },
)
PLAIN = RunSummary(id="r2", status="succeeded", tenant="acme", model="scripted:scripted")


def test_summarize_reads_the_custom_id_failure_kind_and_parent() -> None:
    assert (FAILED.custom_id, FAILED.error_kind, FAILED.parent) == ("order-7", "tool", "mother")
    assert (FAILED.model, FAILED.created_at) == ("openai:gpt-4o-mini", 100.5)
    assert (PLAIN.custom_id, PLAIN.error_kind, PLAIN.parent) == (None, None, None)


@pytest.mark.parametrize(
    ("run_filter", "failed", "plain"),
    [
        (RunFilter(), True, True),
        (RunFilter(status="failed"), True, False),
        (RunFilter(error_kind="tool"), True, False),
        (RunFilter(error_kind="provider"), False, False),
        (RunFilter(model="GPT-4o"), True, False),  # a substring, any case
        (RunFilter(model="scripted"), False, True),
        (RunFilter(metadata={"team": "ops"}), True, False),
        (RunFilter(metadata={"priority": "2"}), True, False),  # compared as text
        (RunFilter(metadata={"team": "dev"}), False, False),
        (RunFilter(search="ORDER-7"), True, False),  # the custom id
        (RunFilter(search="0123456789ab"), True, False),  # the run id
        (RunFilter(search="r2"), False, True),
        (RunFilter(search="op"), True, False),  # a metadata value
        (RunFilter(search="nowhere"), False, False),
        (RunFilter(status="failed", search="r2"), False, False),  # every field must hold
    ],
)
def test_a_filter_admits_a_run_when_every_field_given_holds(
    run_filter: RunFilter, failed: bool, plain: bool
) -> None:
    assert (run_filter.admits(FAILED), run_filter.admits(PLAIN)) == (failed, plain)
