"""Outbound HTTP a spec chose (HTTP tools, webhooks), guarded against SSRF.

Every hop (the first request and each redirect) is checked before it is sent: the host
must be allowed (`orchestrator.egress.HostAllowList`, and the tool's own `allow_hosts`),
it is resolved here, every address must be public unless the deployment names the host
exactly, and the connection then goes to the address that was checked: the network
backend below connects to the pinned address, never resolving the name again, so a DNS
answer that changes between check and connect (rebinding) cannot reach another address.
TLS still verifies the certificate against the host name. Proxies from the environment
are ignored. Responses are read up to a byte limit.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from agentq.orchestrator.core.errors import ToolError
from agentq.orchestrator.policy.egress import SCHEMES, HostAllowList
from agentq.orchestrator.policy.endpoints import Resolver, non_public, system_resolver

MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class EgressRefused(ToolError):
    """The request would reach a host or address the deployment does not allow."""


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects a host name only to the address the guard checked for it."""

    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.pins: dict[str, str] = {}

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address = self.pins.get(host.lower())
        if address is None:  # fail closed: nothing unchecked is connected
            raise httpcore.ConnectError(f"{host} was not checked before connecting")
        return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable from here")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _PinnedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, backend: _PinnedBackend) -> None:
        super().__init__(trust_env=False)
        ssl_context = httpx.create_ssl_context(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context, max_connections=4, network_backend=backend
        )


@dataclass(frozen=True)
class Fetched:
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    url: str


class GuardedHttp:
    """One caller's guarded client (an HTTP tool call, a webhook sender)."""

    def __init__(
        self,
        allow: HostAllowList,
        *,
        only_hosts: frozenset[str] | None = None,
        resolve: Resolver | None = None,
    ) -> None:
        self.allow = allow
        self.only_hosts = (
            frozenset(h.lower() for h in only_hosts) if only_hosts is not None else None
        )
        self.resolve = resolve or system_resolver
        self._backend = _PinnedBackend()
        self._client = httpx.AsyncClient(
            transport=_PinnedTransport(self._backend), follow_redirects=False, trust_env=False
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def check(self, url: httpx.URL) -> str:
        """The address `url` may be reached at, pinned for its host; else EgressRefused."""
        host = url.host.lower()
        if url.scheme not in SCHEMES:
            raise EgressRefused(f"{url}: only http and https are allowed")
        if self.only_hosts is not None and host not in self.only_hosts:
            raise EgressRefused(f"host {host!r} is not in the tool's allow_hosts")
        if not self.allow.allows(host):
            raise EgressRefused(self.allow.refusal(host))
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            try:
                addresses = await self.resolve(host, port)
            except (OSError, TimeoutError) as exc:
                raise EgressRefused(f"cannot resolve {host!r} ({exc})") from None
        if not addresses:
            raise EgressRefused(f"{host!r} resolves to no address")
        if not self.allow.names(host):
            for address in addresses:
                if non_public(address):
                    raise EgressRefused(
                        f"{host!r} resolves to a non-public address ({address}); the "
                        f"deployment must name that host exactly in {self.allow.setting}"
                    )
        return self._backend.pins.setdefault(host, addresses[0])

    async def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        json: Any = None,
        content: bytes | None = None,
        timeout_s: float = 30.0,
        max_bytes: int = 1_000_000,
    ) -> Fetched:
        """The final response (redirects followed, each hop checked), its body capped."""
        request = self._client.build_request(
            method,
            url,
            headers=headers,
            json=json,
            content=content,
            timeout=timeout_s,
        )
        for _ in range(MAX_REDIRECTS + 1):
            await self.check(request.url)
            response = await self._client.send(request, stream=True)
            try:
                if response.status_code in REDIRECTS and response.next_request is not None:
                    request = response.next_request
                    continue
                body, truncated = await _read_capped(response, max_bytes)
            finally:
                await response.aclose()
            return Fetched(
                response.status_code, response.headers, body, truncated, str(request.url)
            )
        raise EgressRefused(f"more than {MAX_REDIRECTS} redirects")


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > max_bytes:
            chunks.append(chunk[: max_bytes - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False
