"""What every route reaches for: the client, the config, the caller, and their runs."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import Request

from agentq.orchestrator.client import Client
from agentq.orchestrator.core.errors import RunNotFoundError
from agentq.serve.auth import Principal, authenticate, require
from agentq.serve.config import ServeConfig
from agentq.serve.errors import ApiError, not_found
from agentq.serve.feeds import CallFeeds, RunFeeds
from agentq.serve.limits import OpenStreams
from agentq.serve.tokens import LIVE_TOKEN, RUN_SCOPE_PREFIX, Signer, grant_of, is_token, presented

T = TypeVar("T")


async def resolved(value: Awaitable[T] | T) -> T:
    """redis-py types its asyncio commands as `Awaitable[X] | X`; this narrows them."""
    if inspect.isawaitable(value):
        return await value
    return value


def client_of(request: Request) -> Client:
    client: Client = request.app.state.client
    return client


def feeds_of(request: Request) -> RunFeeds:
    feeds: RunFeeds = request.app.state.feeds
    return feeds


def call_feeds_of(request: Request) -> CallFeeds:
    feeds: CallFeeds = request.app.state.call_feeds
    return feeds


def streams_of(request: Request) -> OpenStreams:
    streams: OpenStreams = request.app.state.streams
    return streams


def config_of(request: Request) -> ServeConfig:
    config: ServeConfig = request.app.state.config
    return config


def signer_of(request: Request) -> Signer:
    signer: Signer = request.app.state.signer
    return signer


async def look_up_token(request: Request) -> None:
    """Whether the token a request carries is live (not revoked), for `grant_of` to read:
    the one Redis read a token costs, before any door handles the request. A request
    with a key, nothing, or a token that does not verify reads nothing."""
    found = presented(request)
    if found is None or not is_token(found[1]):
        return
    grant = signer_of(request).verify(found[1])
    if grant is not None and await client_of(request).credentials.live(
        grant.holder, grant.token_id
    ):
        setattr(request.state, LIVE_TOKEN, grant.token_id)


def principal_of(request: Request) -> Principal:
    """Who calls: a token's narrowed principal, else the API key's."""
    grant = grant_of(request, signer_of(request))
    keys = config_of(request).keys
    principal = grant.principal if grant is not None else authenticate(request, keys)
    request.state.tenant = principal.tenant  # what the metrics count the request under
    return principal


def caller(request: Request, scope: str) -> Principal:
    principal = principal_of(request)
    require(principal, scope)
    return principal


async def run_owner(request: Request, run_id: str) -> str | None:
    """The tenant the run belongs to; None when there is no such run."""
    try:
        return (await client_of(request).runs.status(run_id)).tenant
    except RunNotFoundError:
        return None


async def own_run(request: Request, run_id: str, scope: str) -> Principal:
    """The caller, once the run is known to be theirs: another tenant's run is a 404."""
    principal = principal_of(request)
    # An events token reads its one run (the `run:ID` scope) and nothing else.
    if not (scope == "runs:read" and RUN_SCOPE_PREFIX + run_id in principal.scopes):
        require(principal, scope)
    if await run_owner(request, run_id) != principal.tenant:
        raise not_found(f"no run with id {run_id!r}")
    return principal


MAX_SEQ = 2**63 - 1  # an event's seq is a Redis counter (signed 64-bit)


def resume_point(after: int | None, last_event_id: str | None) -> int:
    """Where a stream resumes: `Last-Event-ID` (a seq), else `?after=`, else the start."""
    if last_event_id and last_event_id.strip().isdigit():
        start = int(last_event_id)
        if start > MAX_SEQ:
            raise ApiError(
                422,
                "invalid_request",
                f"Last-Event-ID: no event has a seq above {MAX_SEQ}",
                field="Last-Event-ID",
            )
        return start
    return after or 0
