"""The model client: the one way a worker calls a model.

Model steps, tool-call repair and MCP sampling all come through `generate`:

    endpoint (models file, allow-lists, address check)
      → provider for its wire format (prompt-based tools when asked)
      → the fleet's shared rate limit (response headers teach it the real limits)
      → retries with backoff
      → never past the deadline

Response headers reach the limiter explicitly: each call's provider carries an
observer, which travels with its HTTP requests as an extension and is called
by this client's httpx response hook.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import httpx

from agentq.orchestrator.core.errors import ProviderError, SpecError
from agentq.orchestrator.cost.prices import Prices, load_prices
from agentq.orchestrator.policy.endpoints import EndpointPolicy
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.workers.models import ProviderContext, make_provider, providers
from agentq.workers.models.base import DeltaSink, ModelRequest, ModelResponse, Provider
from agentq.workers.models.batch_api import BATCH_WIRES
from agentq.workers.models.driver import HttpProvider
from agentq.workers.models.http import HEADERS_EXTENSION
from agentq.workers.models.pricing import priced_response
from agentq.workers.models.ratelimit import RateLimitedProvider, RateLimiter, limit_key
from agentq.workers.models.redact import key_scrubbed
from agentq.workers.models.retry import RetryPolicy, generate_with_retries


async def _deliver_headers(response: httpx.Response) -> None:
    observer = response.request.extensions.get(HEADERS_EXTENSION)
    if observer is not None:
        observer(response.headers)


def install_header_hook(http: httpx.AsyncClient) -> None:
    hooks = http.event_hooks
    if _deliver_headers not in hooks["response"]:
        http.event_hooks = {**hooks, "response": [*hooks["response"], _deliver_headers]}


class ModelClient:
    def __init__(
        self,
        http: httpx.AsyncClient,
        env: Mapping[str, str],
        *,
        policy: EndpointPolicy | None = None,
        limiter: RateLimiter | None = None,
        retry: RetryPolicy | None = None,
        prices: Prices | None = None,
    ) -> None:
        self.http = http
        self.env = env
        self.policy = policy or EndpointPolicy()
        # What answers cost (None: the built-in list prices alone).
        self.prices = prices or load_prices(None)
        self.limiter = limiter
        self.retry = retry
        # Where each endpoint's calls go (see base_url): the policy does not change
        # under a running client.
        self._base_urls: dict[tuple[str, str | None, str | None, str | None], str | None] = {}
        install_header_hook(http)

    async def provider(
        self, request: ModelRequest, *, trusted: bool = False
    ) -> tuple[Provider, str | None]:
        """The provider stack for one call, and the key it may send: checked again here,
        in the worker, before any request (a spec may have been submitted under other
        settings)."""
        try:
            endpoint = self.policy.resolve(request.model, providers(), trusted=trusted)
            await self.policy.check_addresses(endpoint)
        except SpecError as exc:
            raise ProviderError(f"{request.model.label}: {exc.message}", retryable=False) from None
        # A snapshot per call, so that a key rotated in the environment is used.
        env = dict(self.env)
        seen: list[httpx.Headers] = []
        ctx = ProviderContext(http=self.http, env=env, endpoint=endpoint, on_headers=seen.append)
        provider = make_provider(request.model, ctx)
        if self.limiter is not None and endpoint.provider.rate_limited:
            provider = RateLimitedProvider(provider, self.limiter, limit_key(endpoint, env), seen)
        return provider, env.get(endpoint.key_env) if endpoint.key_env else None

    async def batch_provider(self, request: ModelRequest) -> HttpProvider | None:
        """The provider for `request` if its endpoint has a batch API (checked as a direct
        call is checked); None: the step calls the model directly."""
        provider = await self.http_provider(request)
        if provider is None or provider.endpoint.provider.wire not in BATCH_WIRES:
            return None
        return provider if provider.endpoint.base_url is not None else None

    async def http_provider(self, request: ModelRequest) -> HttpProvider | None:
        """The provider for `request` when it speaks a wire format over HTTP, for the calls
        beside a model call (a batch API, cached contents), checked as a direct call is."""
        try:
            endpoint = self.policy.resolve(request.model, providers())
            await self.policy.check_addresses(endpoint)
        except SpecError as exc:
            raise ProviderError(f"{request.model.label}: {exc.message}", retryable=False) from None
        ctx = ProviderContext(http=self.http, env=dict(self.env), endpoint=endpoint)
        provider = make_provider(request.model, ctx)
        return provider if isinstance(provider, HttpProvider) else None

    def wire(self, ref: ModelRef) -> str | None:
        """The wire format the reference's endpoint speaks; None if it resolves nowhere
        (its call fails on its own). No address check: for choosing, not for calling."""
        try:
            return self.policy.resolve(ref, providers()).provider.wire
        except SpecError:
            return None

    def native_output(self, ref: ModelRef) -> bool:
        """Whether the endpoint's wire format takes a JSON-schema response format; a
        reference that resolves nowhere has none (its call fails on its own)."""
        try:
            return self.policy.resolve(ref, providers()).provider.native_output
        except SpecError:
            return False

    def base_url(self, request: ModelRequest) -> str | None:
        """Where the call goes (for its span's server attributes); None if nowhere allowed
        or the provider's own default. Resolved once per endpoint: every traced model
        step asks, and resolving takes longer than the rest of a chat span's attributes."""
        ref = request.model
        key = (ref.provider, ref.endpoint, ref.base_url, ref.api_key_env)
        known = self._base_urls
        if key not in known:
            if len(known) >= 256:
                known.clear()
            try:
                known[key] = self.policy.resolve(ref, providers()).base_url
            except SpecError:
                known[key] = None
        return known[key]

    def priced(self, ref: ModelRef, response: ModelResponse, *, batch: bool) -> ModelResponse:
        """The answer with its usage's cost (workers/models/pricing.py); `batch`: answered
        through the provider's batch API."""
        return priced_response(self.prices, self.policy, ref, response, batch=batch)

    async def generate(
        self,
        request: ModelRequest,
        sink: DeltaSink,
        *,
        deadline: float | None = None,
        trusted: bool = False,
    ) -> ModelResponse:
        """One model call; `deadline` is on time.monotonic. `trusted`: the model
        reference comes from the deployment's own files, not from a spec."""
        provider, key = await self.provider(request, trusted=trusted)
        # Whatever the provider's code (a registered one too), its errors are stored in the
        # run: no echo of the key may be in them.
        with key_scrubbed(key):
            return await generate_with_retries(provider, request, sink, self.retry, deadline)

    async def generate_within(
        self, request: ModelRequest, sink: DeltaSink, timeout_s: float, *, trusted: bool = False
    ) -> ModelResponse:
        return await self.generate(
            request, sink, deadline=time.monotonic() + timeout_s, trusted=trusted
        )
