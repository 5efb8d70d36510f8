"""The providers' batch APIs, served by the fakes (fake_openai, fake_responses, fake_anthropic).

    with FakeOpenAI(turns) as server:
        server.batches.script = BatchScript(error_lines={1})   # line 1 answers a 500
        ...
        server.batch_creations()     # the POSTs that created batches (never twice!)

Each batch line is answered by the fake's own script, exactly as a direct
unstreamed request with the line's body would be (one turn per answered line,
in input order, when the batch completes). Shapes follow the API references:

OpenAI: `POST /v1/files` (multipart, purpose `batch`, JSONL of
`{custom_id, method, url, body}`), `POST /v1/batches` (`input_file_id`,
`endpoint`, `completion_window`, `metadata`), `GET /v1/batches` (list),
`GET /v1/batches/{id}` whose `status` moves one state per poll: validating →
in_progress → finalizing → completed (or → failed from validating, → expired
or → cancelling → cancelled from in_progress), `GET /v1/files/{id}/content`:
the output file (`{id, custom_id, response: {status_code, request_id, body},
error: null}`) and the error file (a non-200 `response`, or `error: {code,
message}` with `batch_expired` / `batch_cancelled`), lines in reverse order.

Anthropic: `POST /v1/messages/batches` (`requests: [{custom_id, params}]`),
`GET /v1/messages/batches/{id}` (`processing_status` in_progress → ended,
`request_counts`, `results_url` once ended), `GET results_url`: JSONL of
`{custom_id, result: {type: succeeded|errored|expired|canceled, ...}}`, lines
in reverse order.

`BatchScript.hold`: while this event is unset, a batch stays in progress (a
test kills the polling worker meanwhile).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import Any

from tests.support.fake_http import Recorded, Reply

# Answers one line's body as the fake's direct endpoint would.
Answer = Callable[[dict[str, Any]], Reply]


@dataclass
class BatchScript:
    # How a batch ends: completed | failed | expired | cancelled.
    outcome: str = "completed"
    # Input line indices answered with an error (the others by the script).
    error_lines: set[int] = field(default_factory=set)
    error_status: int = 500
    hold: threading.Event | None = None


_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


def _jsonl(lines: list[dict[str, Any]]) -> Reply:
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return Reply(body=body, content_type="application/jsonl")


def _not_found(what: str) -> Reply:
    return Reply.json(
        {"error": {"message": f"no such {what}", "type": "invalid_request_error"}}, 404
    )


def _multipart(request: Recorded) -> dict[str, bytes]:
    raw = request.body if isinstance(request.body, str) else json.dumps(request.body)
    head = f"Content-Type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
    message = BytesParser(policy=email_policy).parsebytes(head + raw.encode())
    parts: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            parts[name] = payload
    return parts


class OpenAIBatches:
    """The OpenAI Files + Batch endpoints over a fake's direct answers."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.script = BatchScript()
        self.files: dict[str, str] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._lines: dict[str, list[dict[str, Any]]] = {}

    def handle(self, request: Recorded) -> Reply | None:
        path, method = request.path, request.method
        if path == "/v1/files" and method == "POST":
            return self._upload(request)
        if path.startswith("/v1/files/") and path.endswith("/content"):
            file_id = path.removeprefix("/v1/files/").removesuffix("/content")
            if file_id not in self.files:
                return _not_found("file")
            return Reply(body=self.files[file_id].encode(), content_type="application/jsonl")
        if path == "/v1/batches" and method == "POST":
            return self._create(request)
        if path == "/v1/batches" and method == "GET":
            return Reply.json({"object": "list", "data": list(self.batches.values())[::-1]})
        if path.startswith("/v1/batches/") and method == "GET":
            batch = self.batches.get(path.removeprefix("/v1/batches/"))
            return _not_found("batch") if batch is None else Reply.json(self._advance(batch))
        return None

    def _upload(self, request: Recorded) -> Reply:
        parts = _multipart(request)
        if parts.get("purpose") != b"batch" or "file" not in parts:
            return Reply.json({"error": {"message": "purpose batch and a file are required"}}, 400)
        file_id = _new_id("file")
        self.files[file_id] = parts["file"].decode()
        return Reply.json(
            {"id": file_id, "object": "file", "purpose": "batch", "bytes": len(parts["file"])}
        )

    def _create(self, request: Recorded) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        file_id = body.get("input_file_id")
        if file_id not in self.files or body.get("completion_window") != "24h":
            return Reply.json({"error": {"message": "bad input_file_id or window"}}, 400)
        lines = [json.loads(line) for line in self.files[file_id].splitlines() if line.strip()]
        if not lines:
            return Reply.json({"error": {"message": "the input file is empty"}}, 400)
        if any(line.get("url") != body.get("endpoint") for line in lines):
            return Reply.json({"error": {"message": "a line's url is not the endpoint"}}, 400)
        batch_id = _new_id("batch")
        self._lines[batch_id] = lines
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "input_file_id": file_id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "errors": None,
            "metadata": body.get("metadata"),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        }
        return Reply.json(self.batches[batch_id])

    def _advance(self, batch: dict[str, Any]) -> dict[str, Any]:
        """One poll, one step along the batch's life."""
        status, outcome = batch["status"], self.script.outcome
        held = self.script.hold is not None and not self.script.hold.is_set()
        if status == "validating":
            if outcome == "failed":
                batch["status"] = "failed"
                batch["errors"] = {"object": "list", "data": [{"code": "invalid", "message": "x"}]}
            else:
                batch["status"] = "in_progress"
        elif status == "in_progress" and not held:
            batch["status"] = {"expired": "expired", "cancelled": "cancelling"}.get(
                outcome, "finalizing"
            )
            if outcome == "expired":
                self._finish(batch, "batch_expired")
        elif status == "cancelling":
            batch["status"] = "cancelled"
            self._finish(batch, "batch_cancelled")
        elif status == "finalizing":
            batch["status"] = "completed"
            self._finish(batch, None)
        return batch

    def _finish(self, batch: dict[str, Any], unfinished: str | None) -> None:
        output: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for index, line in enumerate(self._lines[batch["id"]]):
            cid = line["custom_id"]
            if unfinished is not None:
                errors.append(
                    {
                        "id": _new_id("batch_req"),
                        "custom_id": cid,
                        "response": None,
                        "error": {"code": unfinished, "message": f"This request {unfinished}."},
                    }
                )
                continue
            reply = (
                Reply.json(
                    {"error": {"message": "scripted line error", "type": "server_error"}},
                    self.script.error_status,
                )
                if index in self.script.error_lines
                else self.answer(line["body"])
            )
            record = {
                "id": _new_id("batch_req"),
                "custom_id": cid,
                "response": {
                    "status_code": reply.status,
                    "request_id": _new_id("req"),
                    "body": json.loads(reply.body),
                },
                "error": None,
            }
            (output if reply.status == 200 else errors).append(record)
        counts = batch["request_counts"]
        counts["completed"], counts["failed"] = len(output), len(errors)
        for name, lines in (("output_file_id", output), ("error_file_id", errors)):
            if lines:
                file_id = _new_id("file")
                self.files[file_id] = "".join(json.dumps(x) + "\n" for x in lines[::-1])
                batch[name] = file_id

    def creations(self, requests: list[Recorded]) -> list[Recorded]:
        return [r for r in requests if r.method == "POST" and r.path == "/v1/batches"]


class AnthropicBatches:
    """The Message Batches endpoints over a fake's direct answers."""

    def __init__(self, answer: Answer, base_url: Callable[[], str]) -> None:
        self.answer = answer
        self.base_url = base_url
        self.script = BatchScript()
        self.batches: dict[str, dict[str, Any]] = {}
        self._requests: dict[str, list[dict[str, Any]]] = {}
        self._results: dict[str, list[dict[str, Any]]] = {}

    def handle(self, request: Recorded) -> Reply | None:
        path, method = request.path, request.method
        root = "/v1/messages/batches"
        if path == root and method == "POST":
            return self._create(request)
        if path.startswith(root + "/") and path.endswith("/results"):
            batch_id = path.removeprefix(root + "/").removesuffix("/results")
            if batch_id not in self._results:
                return _not_found("results")
            return _jsonl(self._results[batch_id][::-1])
        if path.startswith(root + "/") and method == "GET":
            batch = self.batches.get(path.removeprefix(root + "/"))
            return _not_found("batch") if batch is None else Reply.json(self._advance(batch))
        return None

    def _create(self, request: Recorded) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        requests = body.get("requests") or []
        if not requests or any(not r.get("custom_id") or "params" not in r for r in requests):
            return Reply.json({"type": "error", "error": {"message": "bad requests"}}, 400)
        batch_id = _new_id("msgbatch")
        self._requests[batch_id] = requests
        self.batches[batch_id] = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {
                "processing": len(requests),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "results_url": None,
            "ended_at": None,
        }
        return Reply.json(self.batches[batch_id])

    def _advance(self, batch: dict[str, Any]) -> dict[str, Any]:
        held = self.script.hold is not None and not self.script.hold.is_set()
        if batch["processing_status"] == "in_progress" and not held:
            outcome = self.script.outcome
            if outcome == "cancelled":
                batch["processing_status"] = "canceling"
            else:
                self._end(batch, "expired" if outcome == "expired" else None)
        elif batch["processing_status"] == "canceling":
            self._end(batch, "canceled")
        return batch

    def _end(self, batch: dict[str, Any], unfinished: str | None) -> None:
        results: list[dict[str, Any]] = []
        counts = batch["request_counts"]
        for index, request in enumerate(self._requests[batch["id"]]):
            if unfinished is not None:
                result: dict[str, Any] = {"type": unfinished}
            elif index in self.script.error_lines:
                result = {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {"type": "api_error", "message": "scripted line error"},
                    },
                }
            else:
                reply = self.answer(request["params"])
                data = json.loads(reply.body)
                result = (
                    {"type": "succeeded", "message": data}
                    if reply.status == 200
                    else {"type": "errored", "error": data}
                )
            counts[result["type"]] += 1
            results.append({"custom_id": request["custom_id"], "result": result})
        counts["processing"] = 0
        self._results[batch["id"]] = results
        batch["processing_status"] = "ended"
        batch["ended_at"] = "2026-11-22T00:00:00Z"
        batch["results_url"] = f"{self.base_url()}/messages/batches/{batch['id']}/results"

    def creations(self, requests: list[Recorded]) -> list[Recorded]:
        return [r for r in requests if r.method == "POST" and r.path == "/v1/messages/batches"]


def line_request(path: str, body: dict[str, Any]) -> Recorded:
    """A batch line as the direct request it stands for (not recorded as received)."""
    return Recorded(method="POST", path=path, query={}, headers={}, body=body)
