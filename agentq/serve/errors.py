"""Errors as `{"error": {"type", "message", "field"?}}` with the status that fits."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentq.orchestrator.core.errors import (
    AgentqError,
    BudgetReachedError,
    RunConflictError,
    RunNotFoundError,
    RunStateError,
    RunTimeoutError,
    SpecError,
    StartTimeError,
    TenantLimitError,
)
from agentq.orchestrator.redis.bounded_pool import PoolBusyError
from agentq.orchestrator.redis.faults import infrastructure_error


class ApiError(StarletteHTTPException):
    """An error response. An HTTP exception, so that one raised while FastAPI reads a body
    (the body limit's 413) reaches the client as it is, not as a 400."""

    def __init__(
        self,
        status: int,
        type_: str,
        message: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        limit: str | None = None,
    ) -> None:
        super().__init__(status, message, headers)
        self.status = status
        self.type = type_
        self.message = message
        self.field = field
        self.headers = headers
        self.limit = limit  # the setting a 413/429 names (docs/security.md, "Limits")


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


def conflict(message: str) -> ApiError:
    return ApiError(409, "conflict", message)


def error_body(
    type_: str, message: str, field: str | None = None, limit: str | None = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"type": type_, "message": message}
    if field:
        error["field"] = field
    if limit:
        error["limit"] = limit
    return {"error": error}


def _respond(
    status: int,
    type_: str,
    message: str,
    field: str | None = None,
    headers: Any = None,
    limit: str | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(type_, message, field, limit), status_code=status, headers=headers
    )


def validation_error(exc: ValidationError | RequestValidationError, *, skip: int = 0) -> ApiError:
    """The first problem, named by its field (same wording as the CLI's `invalid spec`)."""
    errors = exc.errors()
    first = errors[0]
    loc = [str(p) for p in first["loc"]][skip:]
    where = ".".join(loc) or "body"
    message = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return ApiError(422, "invalid_request", f"{where}: {message}{more}", field=where)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return _respond(exc.status, exc.type, exc.message, exc.field, exc.headers, exc.limit)

    @app.exception_handler(RequestValidationError)
    async def _request(_: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI puts "body"/"query" first in a location; the field is what follows.
        err = validation_error(exc, skip=1)
        return _respond(err.status, err.type, err.message, err.field)

    @app.exception_handler(ValidationError)
    async def _spec(_: Request, exc: ValidationError) -> JSONResponse:
        err = validation_error(exc)
        return _respond(err.status, err.type, err.message, err.field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        type_ = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _respond(exc.status_code, type_, str(exc.detail), headers=exc.headers)

    @app.exception_handler(AgentqError)
    async def _agentq(_: Request, exc: AgentqError) -> JSONResponse:
        if isinstance(exc, RunNotFoundError):
            return _respond(404, "not_found", exc.message)
        if isinstance(exc, RunStateError):
            return _respond(409, "conflict", exc.message)
        if isinstance(exc, RunTimeoutError):
            return _respond(408, "timeout", exc.message)
        if isinstance(exc, TenantLimitError):
            retry_after = {"Retry-After": str(max(1, round(exc.retry_after_s)))}
            return _respond(429, "rate_limited", exc.message, headers=retry_after, limit=exc.limit)
        if isinstance(exc, BudgetReachedError):
            # 402, not 429: waiting does not help; the budget must be raised.
            return _respond(402, "budget_reached", exc.message, limit=exc.limit)
        if isinstance(exc, RunConflictError):
            return _respond(409, "conflict", exc.message, "id")
        if isinstance(exc, StartTimeError):
            return _respond(400, "invalid_request", exc.message, "start_at")
        if isinstance(exc, SpecError):
            return _respond(422, "invalid_request", exc.message, "spec")
        if isinstance(exc, PoolBusyError):
            # Redis answers: this process has more requests than connections right now.
            busy = f"{exc.message}: try again (AGENTQ_SERVE_REDIS_CONNECTIONS)"
            headers = {"Retry-After": "1"}
            return _respond(429, "rate_limited", busy, headers=headers, limit="redis_connections")
        return _respond(503, "unavailable", exc.message)

    @app.exception_handler(RedisError)
    async def _redis(_: Request, exc: RedisError) -> JSONResponse:
        # A Redis error no sub-client mapped: still Redis's, still a 503 the client can
        # retry, never a 500 with a traceback.
        return _respond(503, "unavailable", infrastructure_error(exc).message)
