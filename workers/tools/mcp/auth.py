"""HTTP authentication for MCP servers: a bearer token from the environment,
or an OAuth 2 client-credentials token fetched and cached until it expires.

The SDK's own OAuth providers discover the authorization server from the MCP
server's metadata; a deployment that already knows its token endpoint (the
usual machine-to-machine case) needs none of that, so this is a small
`httpx2.Auth` of our own.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, Callable, Generator

import httpx2

from agentq.orchestrator.core.errors import InfrastructureError
from agentq.workers.tools.mcp.config import AuthConfig, BearerAuth, ClientCredentialsAuth

# Refresh this long before the token says it expires, so a request never
# leaves with a token that dies in flight.
EXPIRY_MARGIN_S = 30.0
# When the token endpoint gives no `expires_in`, re-fetch after this long.
DEFAULT_TOKEN_LIFETIME_S = 300.0


def env_value(name: str, *, server: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise InfrastructureError(
            f"MCP server {server!r}: environment variable {name} is not set (named by its auth)"
        )
    return value


def build_auth(auth: AuthConfig | None, *, server: str) -> httpx2.Auth | None:
    if auth is None:
        return None
    if isinstance(auth, BearerAuth):
        token = env_value(auth.token_env, server=server)
        return StaticBearer(token)
    return ClientCredentials(auth, server=server)


class StaticBearer(httpx2.Auth):
    def __init__(self, token: str) -> None:
        self._token = token

    def auth_flow(
        self, request: httpx2.Request
    ) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request


class ClientCredentials(httpx2.Auth):
    """Fetches a token with the client-credentials grant; refreshes on expiry or a 401."""

    def __init__(
        self,
        config: ClientCredentialsAuth,
        *,
        server: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._server = server
        self._clock = clock
        self._token: str | None = None
        self._expires_at = 0.0
        # Concurrent calls on one session share one token fetch.
        self._lock = asyncio.Lock()

    def sync_auth_flow(
        self, request: httpx2.Request
    ) -> Generator[httpx2.Request, httpx2.Response, None]:
        raise RuntimeError("ClientCredentials only works with an async client")

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        async with self._lock:
            if self._valid_token() is None:
                response = yield self._token_request()
                await response.aread()
                self._store(response)
            token = self._token
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401:
            return
        # The server may have revoked the token before its stated expiry:
        # fetch a fresh one once and resend.
        async with self._lock:
            if self._token == token:
                token_response = yield self._token_request()
                await token_response.aread()
                self._store(token_response)
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request

    def _valid_token(self) -> str | None:
        if self._token is not None and self._clock() < self._expires_at:
            return self._token
        return None

    def _token_request(self) -> httpx2.Request:
        form = {
            "grant_type": "client_credentials",
            "client_id": env_value(self._config.client_id_env, server=self._server),
            "client_secret": env_value(self._config.client_secret_env, server=self._server),
        }
        if self._config.scope:
            form["scope"] = self._config.scope
        if self._config.audience:
            form["audience"] = self._config.audience
        return httpx2.Request(
            "POST",
            self._config.token_url,
            data=form,
            headers={"Accept": "application/json"},
        )

    def _store(self, response: httpx2.Response) -> None:
        if response.status_code != 200:
            raise InfrastructureError(
                f"MCP server {self._server!r}: the token endpoint answered "
                f"{response.status_code}: {response.text[:200]}"
            )
        body = response.json()
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise InfrastructureError(
                f"MCP server {self._server!r}: the token endpoint returned no access_token"
            )
        lifetime = body.get("expires_in")
        if not isinstance(lifetime, int | float):
            lifetime = DEFAULT_TOKEN_LIFETIME_S
        lifetime_s = float(lifetime)
        self._token = token
        self._expires_at = self._clock() + max(0.0, lifetime_s - EXPIRY_MARGIN_S)
