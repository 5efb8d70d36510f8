"""Short-lived, narrow tokens: what travels where a long-lived key must not.

A token is `aqt_` + base64url(JSON claims) + `.` + base64url(HMAC-SHA256). Every
`agentq serve` replica verifies its signature with the deployment's token secret, and
its liveness in Redis (`client.credentials`): minting records the token (its id, under
the key that minted it) until it expires, and revoking it (`DELETE /v1/tokens/{id}`, or
signing out of a session) deletes the record. That lookup is the one I/O a token costs,
done before a request is handled (`deps.look_up_token`); `grant_of` then reads its
answer, so verifying stays a pure function of the request. Rotating the secret ends
every token at once.

A token names one purpose, and its scopes follow from it (never wider than the key
that minted it):

- `session`: the dashboard's cookie, with the key's scopes; accepted from the cookie only.
- `events`: `run:ID`, reading one run (its event stream from an EventSource URL).
- `mcp`: `tools:call` (and the key's `tool:` patterns), for MCP clients without headers.
- `chat`: `chat:ID` (one chat) or `subject:USER` (that user's chats), for a browser
  talking to the chat endpoint; no other route accepts them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request

from agentq.orchestrator.client import Client
from agentq.serve.auth import TOOL_SCOPE_PREFIX, Principal, hash_key
from agentq.serve.config import ServeConfig
from agentq.serve.errors import ApiError

PREFIX = "aqt_"
COOKIE = "agentq_session"
QUERY = "token"
RUN_SCOPE_PREFIX = "run:"
CHAT_SCOPE_PREFIX = "chat:"
SUBJECT_SCOPE_PREFIX = "subject:"
# On a request's state: the id of the token it carries, when Redis says it is live.
LIVE_TOKEN = "agentq_live_token"


@dataclass(frozen=True)
class Grant:
    """A verified token: who it acts for, and the key it was minted from."""

    principal: Principal
    purpose: str
    holder: str  # the minting key's hash: a token acts as that key (MCP sessions)
    expires_at: float
    token_id: str  # what revokes it (DELETE /v1/tokens/{id})


@dataclass(frozen=True)
class Minted:
    token: str
    token_id: str
    expires_at: float  # epoch seconds


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    def __init__(self, secret: bytes, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self._clock = clock

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._secret, body.encode(), hashlib.sha256).digest())

    def mint(self, principal: Principal, purpose: str, holder: str, ttl_s: float) -> Minted:
        """The token, its id, and when it expires."""
        expires_at = self._clock() + ttl_s
        token_id = secrets.token_urlsafe(12)
        claims = {
            "t": principal.tenant,
            "s": sorted(principal.scopes),
            "p": purpose,
            "h": holder,
            "x": expires_at,
            "i": token_id,
        }
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        return Minted(f"{PREFIX}{body}.{self._mac(body)}", token_id, expires_at)

    def verify(self, token: str) -> Grant | None:
        """The token's grant, or None when it is forged, malformed or expired."""
        body, _, mac = token.removeprefix(PREFIX).partition(".")
        if not token.startswith(PREFIX) or not hmac.compare_digest(mac, self._mac(body)):
            return None
        try:
            claims = json.loads(_unb64(body))
            grant = Grant(
                Principal(str(claims["t"]), frozenset(str(s) for s in claims["s"])),
                str(claims["p"]),
                str(claims["h"]),
                float(claims["x"]),
                str(claims["i"]),
            )
        except (ValueError, KeyError, TypeError):
            return None
        return grant if grant.expires_at > self._clock() else None


def is_token(credential: str) -> bool:
    return credential.startswith(PREFIX)


def presented(request: Request) -> tuple[str, str] | None:
    """The credential a request carries and where: ("header" | "cookie" | "query", value).

    A long-lived key is read from the Authorization header only; the query string and
    the cookie carry tokens, never keys."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return "header", value.strip()
    query = request.query_params.get(QUERY)
    if query:
        return "query", query
    cookie = request.cookies.get(COOKIE)
    if cookie:
        return "cookie", cookie
    return None


def grant_of(request: Request, signer: Signer) -> Grant | None:
    """The request's token grant; None when it carries a key (or nothing).

    A token that does not verify, was revoked (`deps.look_up_token` found it not live), or arrives
    where its purpose may not (a session token outside its cookie), is refused with 401
    rather than ignored; an expired or revoked session cookie is ignored."""
    found = presented(request)
    if found is None:
        return None
    where, value = found
    if not is_token(value):
        if where != "header":
            raise unauthorized("an API key is accepted in the Authorization header only")
        return None
    grant = signer.verify(value)
    if grant is not None and getattr(request.state, LIVE_TOKEN, None) != grant.token_id:
        grant = None
    if grant is None and where == "cookie":
        return None  # an ended session: as if signed out (the key decides, or 401)
    if grant is None:
        raise unauthorized("the token is invalid, expired or revoked")
    if (grant.purpose == "session") != (where == "cookie"):
        raise unauthorized(f"a {grant.purpose} token is not accepted in the {where}")
    return grant


def holder_of(request: Request, grant: Grant | None) -> str:
    """Who holds the credential: the key's hash (a token's minting key), 'open' for none."""
    if grant is not None:
        return grant.holder
    found = presented(request)
    return hash_key(found[1]) if found is not None else "open"


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def narrowed(principal: Principal, purpose: str, target: str | None) -> Principal:
    """The principal a token of this purpose acts as; ApiError when the key may not mint it."""

    def needs(scope: str) -> None:
        if scope not in principal.scopes:
            raise ApiError(403, "forbidden", f"this key lacks the {scope!r} scope")

    if purpose == "session":
        return principal
    if purpose == "events":
        needs("runs:read")
        return Principal(principal.tenant, frozenset({RUN_SCOPE_PREFIX + str(target)}))
    if purpose == "mcp":
        needs("tools:call")
        tools = {s for s in principal.scopes if s.startswith(TOOL_SCOPE_PREFIX)}
        return Principal(principal.tenant, frozenset({"tools:call", *tools}))
    needs("runs:write")
    return Principal(principal.tenant, frozenset({str(target)}))


async def token_secret(client: Client, config: ServeConfig) -> str:
    """The deployment's secret, or one kept in Redis (the first replica creates it)."""
    return config.token_secret or await client.shared_secret("serve-tokens")
