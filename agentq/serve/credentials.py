"""Trading a key for what a browser or a URL may hold: tokens and the session cookie,
and ending them before they expire (revoking a token, signing out of a session)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field, model_validator

from agentq.serve.auth import Principal, authenticate, hash_key
from agentq.serve.deps import client_of, config_of, own_run, signer_of
from agentq.serve.errors import ApiError, not_found
from agentq.serve.tokens import (
    CHAT_SCOPE_PREFIX,
    COOKIE,
    SUBJECT_SCOPE_PREFIX,
    grant_of,
    holder_of,
    narrowed,
    unauthorized,
)

router = APIRouter(tags=["tokens"])

NAME = r"^[A-Za-z0-9_.:-]+$"  # what a chat id may be (chat_messages.ChatRequest.id)


class TokenRequest(BaseModel):
    """One purpose per token: `run` (events), `mcp`, `chat` or `subject` (the chat door)."""

    purpose: Literal["events", "mcp", "chat"] | None = None
    run: str | None = Field(default=None, max_length=200)
    chat: str | None = Field(default=None, min_length=1, max_length=200, pattern=NAME)
    subject: str | None = Field(default=None, min_length=1, max_length=200, pattern=NAME)
    ttl_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_purpose(self) -> TokenRequest:
        if self.purpose is None:
            self.purpose = "chat" if self.chat or self.subject else "events" if self.run else None
        wanted = {"events": ["run"], "mcp": [], "chat": ["chat", "subject"]}
        given = [n for n in ("run", "chat", "subject") if getattr(self, n) is not None]
        if self.purpose is None:
            raise ValueError("say what the token is for: run, chat, subject or purpose 'mcp'")
        allowed = wanted[self.purpose]
        if len(given) != min(len(allowed), 1) or not set(given) <= set(allowed):
            needs = " or ".join(allowed) or "nothing else"
            raise ValueError(f"a {self.purpose} token takes {needs}, got {given or 'none'}")
        return self


class TokenOut(BaseModel):
    token: str
    id: str  # what revokes it: DELETE /v1/tokens/{id}
    purpose: str
    expires_at: float


class Login(BaseModel):
    key: str = Field(min_length=1, max_length=1000)


def _key_holder(request: Request) -> Principal:
    """The caller, who must present a key: a token never mints nor revokes a token."""
    if grant_of(request, signer_of(request)) is not None:
        raise ApiError(
            403, "forbidden", "tokens are minted and revoked with an API key, not a token"
        )
    return authenticate(request, config_of(request).keys)


@router.post("/v1/tokens", status_code=201)
async def mint(request: Request, body: TokenRequest) -> TokenOut:
    """A short-lived token for one purpose, narrower than the key that asks for it."""
    principal = _key_holder(request)
    config = config_of(request)
    ttl_s = min(body.ttl_s or config.token_ttl_s, config.token_ttl_s)
    assert body.purpose is not None  # set by the validator
    target: str | None = None
    if body.run is not None:
        target = body.run
        await own_run(request, body.run, "runs:read")
    elif body.chat is not None:
        target = CHAT_SCOPE_PREFIX + body.chat
    elif body.subject is not None:
        target = SUBJECT_SCOPE_PREFIX + body.subject
    holder = holder_of(request, None)
    minted = signer_of(request).mint(
        narrowed(principal, body.purpose, target), body.purpose, holder, ttl_s
    )
    await client_of(request).credentials.issued(holder, minted.token_id, ttl_s)
    return TokenOut(
        token=minted.token, id=minted.token_id, purpose=body.purpose, expires_at=minted.expires_at
    )


@router.delete("/v1/tokens/{token_id}", status_code=204)
async def revoke_token(request: Request, token_id: str) -> Response:
    """End a token the calling key minted, before it expires: its next request is a 401."""
    _key_holder(request)
    if not await client_of(request).credentials.revoke(holder_of(request, None), token_id):
        # Another key's token is as unknown as one never minted.
        raise not_found(f"this key has no live token {token_id!r}")
    return Response(status_code=204)


@router.post("/v1/session", status_code=204)
async def login(request: Request, body: Login) -> Response:
    """Trade a key (posted once, in the body) for an HttpOnly session cookie."""
    keys = config_of(request).keys
    principal = keys.find(body.key) if keys is not None else None
    if keys is not None and principal is None:
        raise unauthorized("a valid API key is required")
    if principal is None:  # no keys configured: the open principal
        principal = authenticate(request, None)
    config = config_of(request)
    holder = hash_key(body.key)
    minted = signer_of(request).mint(principal, "session", holder, config.session_ttl_s)
    await client_of(request).credentials.issued(holder, minted.token_id, config.session_ttl_s)
    response = Response(status_code=204)
    response.set_cookie(
        COOKIE,
        minted.token,
        max_age=int(config.session_ttl_s),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.delete("/v1/session", status_code=204)
async def logout(request: Request) -> Response:
    """Sign out: the session ends here too, so a copy of its cookie is worth nothing."""
    grant = grant_of(request, signer_of(request))
    if grant is not None and grant.purpose == "session":
        await client_of(request).credentials.revoke(grant.holder, grant.token_id)
    response = Response(status_code=204)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
