"""Admission: how a batch's lines become runs, done by the fleet itself.

Two jobs drive it, both `batch_admit` on the model queue, both idempotent:

- the end job: precomputed when a line's run is created and enqueued by the run's own
  end transition (see `finish_run` in the prelude), so no run of a batch can end
  without its end being recorded and the next line admitted;
- the kick: enqueued by the seal of an upload (or by a retry) to admit the first lines.

Whichever worker picks a job up settles it (`batch_settle`: record the end, admit the
batch's next lines, or under the tenant's cap a waiting batch's) and creates the
admitted runs with derived ids. A worker
that dies in between leaves the job to be re-delivered: its settle answers with the same
admissions (keyed by the job id) and the creates find the runs that exist. No single
process the batch depends on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentq.orchestrator.batches.state import (
    Admission,
    BatchField,
    BatchSettle,
    BatchStatus,
    LineStatus,
    RecordField,
)
from agentq.orchestrator.core.envelopes import BatchJobEnvelope, QueuedJob
from agentq.orchestrator.core.errors import AgentqError, InfrastructureError, RunNotFoundError
from agentq.orchestrator.core.jobs import queued_job
from agentq.orchestrator.runs.creation import CreateRequest
from agentq.orchestrator.runs.state import TERMINAL_STATUSES, MetaField, rolled_up_usage
from agentq.orchestrator.spec.run import RunSpec

if TYPE_CHECKING:
    from agentq.orchestrator.client import Client

log = logging.getLogger("agentq.batch")


def end_job(tenant: str, batch_id: str, line: int, run_id: str) -> QueuedJob:
    """The job the run of a line enqueues when it ends (its score is set then)."""
    return queued_job(BatchJobEnvelope(tenant=tenant, batch_id=batch_id, line=line, run_id=run_id))


def kick_job(tenant: str, batch_id: str, nonce: str) -> QueuedJob:
    return queued_job(BatchJobEnvelope(tenant=tenant, batch_id=batch_id, nonce=nonce))


def _error_message(raw: str | None) -> str | None:
    if not raw:
        return None
    try:
        return str(json.loads(raw).get("message", raw))
    except (ValueError, AttributeError):
        return raw


def line_record(meta: dict[str, str]) -> dict[str, Any]:
    """A finished run's compact record: what `batch results` shows once the run's own
    keys are gone."""
    status = meta.get(MetaField.STATUS, LineStatus.FAILED)
    # What the line cost: its run's and its run's sub-agents'.
    usage = rolled_up_usage(meta).model_dump()
    record: dict[str, Any] = {RecordField.STATUS: status, RecordField.USAGE: usage}
    if meta.get(MetaField.TEXT):
        record[RecordField.TEXT] = meta[MetaField.TEXT]
    if MetaField.OUTPUT in meta:
        record[RecordField.OUTPUT] = meta[MetaField.OUTPUT]
    error = _error_message(meta.get(MetaField.ERROR))
    if error:
        record[RecordField.ERROR] = error
    elif status == LineStatus.CANCELLED:
        record[RecordField.ERROR] = "cancelled"
    return record


def failed_record(message: str) -> dict[str, Any]:
    return {RecordField.STATUS: LineStatus.FAILED, RecordField.ERROR: message}


def vanished_message(run_id: str) -> str:
    return (
        f"run {run_id} is gone: it was never created, or its state expired "
        "before its end was recorded"
    )


async def run_meta(client: Client, run_id: str) -> dict[str, str]:
    """The run's meta hash; {} when the run is gone (never created, or expired)."""
    try:
        return await client.runs.store.meta(run_id)
    except RunNotFoundError:
        return {}


def ended_line(run_id: str, meta: dict[str, str]) -> tuple[dict[str, Any], float | None] | None:
    """The record and end time of a line whose run ended, or whose run is gone (then it
    failed: nothing will ever end it otherwise); None while the run is still going."""
    if not meta:
        return failed_record(vanished_message(run_id)), None
    if meta.get(MetaField.STATUS) not in TERMINAL_STATUSES:
        return None
    return line_record(meta), float(meta.get(MetaField.FINISHED_AT, time.time()))


async def run_admission(client: Client, envelope: BatchJobEnvelope, token: str) -> int:
    """Settle one admission job and create the runs it admitted. Returns how many runs
    it created. Raises InfrastructureError (the job is tried again) on Redis trouble."""
    record: dict[str, Any] | None = None
    ended_at: float | None = None
    if envelope.run_id is not None:
        ended = ended_line(envelope.run_id, await run_meta(client, envelope.run_id))
        if ended is None:
            raise InfrastructureError(
                f"run {envelope.run_id} is not finished yet", retryable=True
            )  # cannot happen: the end transition enqueued this job
        record, ended_at = ended
    settle = BatchSettle(
        batch_id=envelope.batch_id,
        token=token,
        by=envelope,
        line=envelope.line,
        run_id=envelope.run_id,
        record=record,
        ended_at=ended_at,
    )
    return await settle_and_admit(client, envelope.tenant, settle)


async def settle_and_admit(client: Client, tenant: str, settle: BatchSettle) -> int:
    """Apply a settle and create the runs it admitted; returns how many were created."""
    created = 0
    work = [settle]
    while work:
        reply = await client.batches.store.settle(tenant, work.pop(0))
        errors = await create_line_runs(client, tenant, reply.admitted)
        for admission, error in zip(reply.admitted, errors, strict=True):
            if error is None:
                created += 1
                continue
            # A line whose run cannot be created fails at once; that end admits the next.
            log.warning("batch %s line %d: %s", admission.batch_id, admission.line, error)
            work.append(
                BatchSettle(
                    batch_id=admission.batch_id,
                    token=f"{settle.token}:failed:{admission.run_id}",
                    by=settle.by,
                    line=admission.line,
                    run_id=admission.run_id,
                    record=failed_record(error),
                )
            )
    return created


async def create_line_runs(
    client: Client, tenant: str, admissions: list[Admission]
) -> list[str | None]:
    """Create the admitted lines' runs (their creations in one round trip); for each
    line, the error message when it cannot run, else None.

    A cancel of the batch between the admission and these creates found no run to
    cancel (`Batches.cancel` passes over it), so each batch is looked at after its runs
    exist: the cancel marked the batch before it looked for the runs, so one of the two
    always sees the other."""
    errors: list[str | None] = [None] * len(admissions)
    requests: list[CreateRequest] = []
    sent: list[int] = []  # the admissions whose run is asked for, in request order
    for i, admission in enumerate(admissions):
        try:
            spec = RunSpec.model_validate_json(admission.spec)
        except ValidationError as exc:
            errors[i] = f"invalid spec: {exc.errors()[0].get('msg', exc)}"
            continue
        job = end_job(tenant, admission.batch_id, admission.line, admission.run_id)
        requests.append(
            CreateRequest(
                spec=spec,
                tenant=tenant,
                end_job=job,
                run_id=admission.run_id,
                batch_line=True,
                batch=admission.batch_id,
                batch_weight=admission.priority,
            )
        )
        sent.append(i)
    for i, outcome in zip(sent, await client.runs.create_many(requests), strict=True):
        if isinstance(outcome, AgentqError):
            errors[i] = outcome.message
    created = [a for a, error in zip(admissions, errors, strict=True) if error is None]
    for batch_id in dict.fromkeys(a.batch_id for a in created):
        status = await client.batches.store.field(tenant, batch_id, BatchField.STATUS)
        if status != BatchStatus.CANCELLED:
            continue
        for admission in (a for a in created if a.batch_id == batch_id):
            with contextlib.suppress(RunNotFoundError):
                await client.runs.cancel(admission.run_id, reason=f"batch {batch_id} cancelled")
    return errors
