"""Model endpoints are deployment configuration; a spec only picks among them.

Where a worker sends a request, and which of its secrets it sends along, is
the deployment's decision. It declares named endpoints in a models file
(`--models FILE` / `$AGENTQ_MODELS`, shared by workers and submitters):

    {"endpoints": {
        "local": {"provider": "openai", "base_url": "http://10.0.0.5:8000/v1",
                  "api_key_env": "LOCAL_LLM_KEY", "models": ["llama-3.1-8b"],
                  "options": {"temperature": 0}}}}

and a spec names an endpoint or a provider, and a model (`"local:llama-3.1-8b"`,
`"openai:gpt-4o"`). A name is looked up as an endpoint first, so an endpoint
called `openai` redirects every `openai:` spec.

A spec's own `base_url` and `api_key_env` are refused unless the deployment
allows them: `AGENTQ_ALLOW_SPEC_ENDPOINTS` lists base-URL prefixes (compared on
the parsed URL: scheme, host, port, path segments), `AGENTQ_ALLOW_SPEC_KEY_ENVS`
lists the variables a spec may name. A prefix without a host (`https://`) lets
any host through whose addresses are all public; a prefix that names a host
(or an IP) allows that host whatever it resolves to. A spec-chosen URL gets a
key only from an allowed variable. The same check runs at submit (a `SpecError`
naming the field) and in the worker before every request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.policy.caching import cache_policy
from agentq.orchestrator.policy.egress import UNSAFE_CHARS, split_url
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.policy.providers import PROVIDER_NAME, ProviderInfo, lookup
from agentq.orchestrator.policy.tool_modes import tool_mode

DEFAULT_PORTS = {"http": 80, "https": 443}
# Characters no base URL needs and URL parsers disagree about.
DNS_TIMEOUT_S = 5.0


class ModelsFileError(SpecError):
    """The models file or an allow-list variable is unusable (exit 2, like a bad flag)."""


class ModelEndpoint(BaseModel):
    """One named endpoint of the models file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = Field(pattern=PROVIDER_NAME.pattern)
    base_url: str | None = Field(default=None, pattern=r"^https?://")
    api_key_env: str | None = Field(default=None, min_length=1)
    # The model names a spec may ask this endpoint for; None: any.
    models: list[str] | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class ModelsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoints: dict[str, ModelEndpoint] = Field(default_factory=dict)


def load_models_file(path: str | Path) -> ModelsFile:
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelsFileError(f"models file {file}: cannot read it ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelsFileError(f"models file {file}: not valid JSON ({exc})") from None
    try:
        models = ModelsFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ModelsFileError(
            f"models file {file}: {where}: {str(first['msg']).removeprefix('Value error, ')}"
        ) from None
    for name in models.endpoints:
        if not PROVIDER_NAME.match(name):
            raise ModelsFileError(f"models file {file}: endpoints.{name}: not a valid name")
    return models


# -- base-URL prefixes -----------------------------------------------------------


@dataclass(frozen=True)
class UrlPrefix:
    """One allowed base-URL prefix, parsed. `host`/`port` None: any."""

    raw: str
    scheme: str
    host: str | None
    port: int | None
    path: str

    @classmethod
    def parse(cls, raw: str) -> UrlPrefix:
        where = f"AGENTQ_ALLOW_SPEC_ENDPOINTS: {raw!r}"
        if UNSAFE_CHARS.search(raw):
            raise ModelsFileError(f"{where} holds whitespace or control characters")
        parts = urlsplit(raw)
        if parts.scheme not in DEFAULT_PORTS:
            raise ModelsFileError(f"{where} must start with http:// or https://")
        if parts.username is not None or parts.query or parts.fragment:
            raise ModelsFileError(f"{where} may not hold credentials, a query or a fragment")
        host = parts.hostname or None
        any_port = parts.netloc.endswith(":")
        try:
            port = None if any_port or host is None else parts.port or DEFAULT_PORTS[parts.scheme]
        except ValueError:
            raise ModelsFileError(f"{where} has an invalid port") from None
        return cls(raw, parts.scheme, host, port, parts.path)

    def matches(self, url: SplitResult, port: int) -> bool:
        if url.scheme != self.scheme:
            return False
        if self.host is not None and url.hostname != self.host:
            return False
        if self.port is not None and port != self.port:
            return False
        prefix, path = self.path, url.path
        if prefix in ("", "/") or path == prefix:
            return True
        return path.startswith(prefix if prefix.endswith("/") else prefix + "/")


def parse_spec_url(url: str) -> tuple[SplitResult, int]:
    """The URL split, and its port; a SpecError for anything a base URL need not be."""
    where = "model.base_url"
    parts = split_url(url, where)
    if parts.query or parts.fragment:
        raise SpecError(f"{where}: may not hold a query or a fragment")
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    segments = unquote(parts.path).split("/")
    if any(s in (".", "..") for s in segments):
        raise SpecError(f"{where}: may not hold '.' or '..' path segments")
    return parts, port


# IPv6 prefixes that carry an IPv4 address in their last 32 bits, which is where a
# packet really goes: the NAT64 well-known prefix (RFC 6052) and IPv4-compatible
# addresses. Python's `is_global` judges the IPv6 address, not the IPv4 inside.
_EMBEDS_IPV4_LAST = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("::/96"))
# The local-use NAT64 prefix (RFC 8215) translates into networks of the operator's own.
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")


def non_public(address: str) -> bool:
    """Loopback, private, link-local (cloud metadata lives there), shared, reserved…,
    also when written as an IPv6 address that embeds an IPv4 one (mapped, NAT64, 6to4)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64:
            return True
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and any(ip in net for net in _EMBEDS_IPV4_LAST):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return not embedded.is_global
    return not ip.is_global


Resolver = Callable[[str, int], Awaitable[list[str]]]


async def system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await asyncio.wait_for(
        loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), DNS_TIMEOUT_S
    )
    return [str(info[4][0]) for info in infos]


# -- the policy --------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """Where one model call goes, resolved and checked. Holds the name of the key
    variable, never the key."""

    provider: ProviderInfo
    model: str
    base_url: str | None
    key_env: str | None
    # The call fails without the key (it was asked for, or the endpoint is the
    # provider's own); a spec-chosen URL without one goes out without a key.
    key_required: bool
    options: dict[str, Any] = field(default_factory=dict)
    endpoint: str | None = None
    # Set when the URL came from a spec through a host-less prefix: its addresses
    # must be public, checked after DNS resolution.
    needs_public_address: bool = False


@dataclass(frozen=True)
class EndpointPolicy:
    """The models file and the allow-lists: what specs may reach."""

    models: ModelsFile = field(default_factory=ModelsFile)
    allowed_prefixes: tuple[UrlPrefix, ...] = ()
    allowed_key_envs: frozenset[str] = frozenset()

    @classmethod
    def build(
        cls, models_path: str | None, allow_endpoints: str = "", allow_key_envs: str = ""
    ) -> EndpointPolicy:
        return cls(
            models=load_models_file(models_path) if models_path else ModelsFile(),
            allowed_prefixes=tuple(
                UrlPrefix.parse(p.strip()) for p in allow_endpoints.split(",") if p.strip()
            ),
            allowed_key_envs=frozenset(v.strip() for v in allow_key_envs.split(",") if v.strip()),
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> EndpointPolicy:
        """From `Settings`: `models` ($AGENTQ_MODELS), `allow_spec_endpoints`,
        `allow_spec_key_envs`."""
        return cls.build(
            settings.models, settings.allow_spec_endpoints, settings.allow_spec_key_envs
        )

    def endpoint_named(self, ref: ModelRef) -> str | None:
        """The models-file endpoint a model reference names, if any."""
        if ref.endpoint is not None:
            return ref.endpoint
        return ref.provider if ref.provider in self.models.endpoints else None

    def resolve(
        self, ref: ModelRef, providers: Mapping[str, ProviderInfo], *, trusted: bool = False
    ) -> Endpoint:
        """Where `ref` goes. `trusted`: the reference comes from the
        deployment's own files (an MCP sampling route), not from a spec."""
        name = self.endpoint_named(ref)
        if name is not None:
            endpoint = self._from_models_file(name, ref, providers)
        else:
            endpoint = self._from_provider(ref, providers, trusted)
        tool_mode(endpoint.options)
        cache_policy(endpoint.options)
        return endpoint

    def _from_provider(
        self, ref: ModelRef, providers: Mapping[str, ProviderInfo], trusted: bool
    ) -> Endpoint:
        info = lookup(providers, ref.provider)
        base_url, key_env = info.default_base_url, info.key_env
        key_required = key_env is not None
        needs_public = False
        if ref.base_url is not None:
            base_url = ref.base_url
            key_required = False
            if not trusted:
                needs_public = self.check_url(ref.base_url).host is None
                # A URL the spec chose gets a key only from a variable the deployment allows.
                if key_env not in self.allowed_key_envs:
                    key_env = None
        if ref.api_key_env is not None:
            if not trusted and ref.api_key_env not in self.allowed_key_envs:
                raise SpecError(
                    f"model.api_key_env: {ref.api_key_env!r} is not a variable specs may name "
                    "(the deployment lists those in AGENTQ_ALLOW_SPEC_KEY_ENVS; or use an "
                    "endpoint of the models file)"
                )
            key_env, key_required = ref.api_key_env, True
        return Endpoint(
            provider=info,
            model=ref.name,
            base_url=base_url,
            key_env=key_env,
            key_required=key_required,
            options=dict(ref.options),
            needs_public_address=needs_public,
        )

    def _from_models_file(
        self, name: str, ref: ModelRef, providers: Mapping[str, ProviderInfo]
    ) -> Endpoint:
        declared = self.models.endpoints.get(name)
        if declared is None:
            known = ", ".join(sorted(self.models.endpoints)) or "none"
            raise SpecError(
                f"model.endpoint: no endpoint named {name!r} (the models file has: {known})"
            )
        if ref.base_url is not None or ref.api_key_env is not None:
            field_ = "base_url" if ref.base_url is not None else "api_key_env"
            raise SpecError(f"model.{field_}: the endpoint {name!r} fixes it; leave it out")
        if declared.models is not None and ref.name not in declared.models:
            raise SpecError(
                f"model.name: the endpoint {name!r} does not serve {ref.name!r} "
                f"(it serves: {', '.join(declared.models) or 'none'})"
            )
        info = lookup(providers, declared.provider, f"models file: endpoints.{name}.provider")
        return Endpoint(
            provider=info,
            model=ref.name,
            base_url=declared.base_url or info.default_base_url,
            key_env=declared.api_key_env or info.key_env,
            key_required=(declared.api_key_env or info.key_env) is not None
            and (declared.api_key_env is not None or declared.base_url is None),
            options={**declared.options, **ref.options},
            endpoint=name,
        )

    def check_url(self, url: str) -> UrlPrefix:
        """The allowed prefix `url` falls under, or a SpecError."""
        parts, port = parse_spec_url(url)
        for prefix in self.allowed_prefixes:
            if prefix.matches(parts, port):
                return prefix
        if not self.allowed_prefixes:
            raise SpecError(
                "model.base_url: this deployment does not let specs choose a URL; name an "
                "endpoint of its models file (or a provider) instead"
            )
        raise SpecError(
            f"model.base_url: {url!r} is not under a prefix this deployment allows "
            "(AGENTQ_ALLOW_SPEC_ENDPOINTS)"
        )

    async def check_addresses(self, endpoint: Endpoint, resolve: Resolver | None = None) -> None:
        """For a spec URL let through by a host-less prefix: every address it resolves
        to must be public. Fails closed when the name does not resolve."""
        if not endpoint.needs_public_address or endpoint.base_url is None:
            return
        parts, port = parse_spec_url(endpoint.base_url)
        host = parts.hostname or ""
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            try:
                addresses = await (resolve or system_resolver)(host, port)
            except (OSError, TimeoutError) as exc:
                raise SpecError(f"model.base_url: cannot resolve {host!r} ({exc})") from None
        for address in addresses:
            if non_public(address):
                raise SpecError(
                    f"model.base_url: {host!r} resolves to a non-public address ({address}); "
                    "a prefix in AGENTQ_ALLOW_SPEC_ENDPOINTS must name that host to allow it"
                )
