"""Where a spec's model may send requests and keys: the models file and the allow-lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError
from agentq.orchestrator.policy.endpoints import (
    Endpoint,
    EndpointPolicy,
    ModelsFileError,
    UrlPrefix,
    load_models_file,
)
from agentq.orchestrator.policy.model_ref import ModelRef
from agentq.orchestrator.policy.providers import BUILTIN_PROVIDERS

pytestmark = pytest.mark.unit

PROVIDERS = BUILTIN_PROVIDERS


def ref(**fields: Any) -> ModelRef:
    return ModelRef.model_validate({"provider": "openai", "name": "m", **fields})


def policy(prefixes: str = "", key_envs: str = "", models: Path | None = None) -> EndpointPolicy:
    return EndpointPolicy.build(str(models) if models else None, prefixes, key_envs)


# -- allow-listed base URLs --------------------------------------------------------


@pytest.mark.parametrize(
    ("prefixes", "url", "allowed"),
    [
        ("https://llm.example/v1", "https://llm.example/v1", True),
        ("https://llm.example/v1", "https://llm.example/v1/", True),
        ("https://llm.example/v1", "https://llm.example/v1/deep", True),
        ("https://llm.example/v1", "https://LLM.example/v1", True),
        ("https://llm.example/v1", "https://llm.example:443/v1", True),
        ("https://llm.example/v1", "https://llm.example/v1evil", False),
        ("https://llm.example/v1", "https://llm.example/v2", False),
        ("https://llm.example/v1", "http://llm.example/v1", False),
        ("https://llm.example/v1", "https://llm.example:8443/v1", False),
        ("https://llm.example/v1", "https://llm.example.evil.com/v1", False),
        ("https://llm.example/v1", "https://llm.example@evil.com/v1", False),
        ("https://llm.example/v1", "https://evil.com@llm.example/v1", False),
        ("https://llm.example/v1", "https://llm.example/v1/../admin", False),
        ("https://llm.example/v1", "https://llm.example/v1/%2e%2e/admin", False),
        ("https://llm.example/v1", "https://llm.example/v1?x=1", False),
        ("https://llm.example/v1", "https://llm.example\\@evil.com/v1", False),
        ("https://llm.example/v1", " https://llm.example/v1", False),
        ("http://127.0.0.1:", "http://127.0.0.1:8000/v1", True),
        ("http://127.0.0.1:", "http://127.0.0.1/v1", True),
        ("http://127.0.0.1:", "http://127.0.0.1.nip.io:8000/v1", False),
        ("http://127.0.0.1:", "http://localhost:8000/v1", False),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8001/v1", False),
        ("https://", "https://anything.example/v1", True),
        ("https://", "http://anything.example/v1", False),
        ("", "https://api.openai.com/v1", False),
        ("https://a.example/v1, https://b.example/", "https://b.example/x", True),
    ],
)
def test_base_url_prefixes(prefixes: str, url: str, allowed: bool) -> None:
    check = policy(prefixes).resolve
    if allowed:
        assert check(ref(base_url=url), PROVIDERS).base_url == url
    else:
        with pytest.raises(SpecError, match=r"^model\.base_url: "):
            check(ref(base_url=url), PROVIDERS)


def test_by_default_no_spec_chooses_a_url() -> None:
    with pytest.raises(SpecError, match="does not let specs choose a URL"):
        policy().resolve(ref(base_url="http://127.0.0.1:9/v1"), PROVIDERS)


@pytest.mark.parametrize("bad", ["ftp://x/", "https://x/?q=1", "https://u:p@x/", "https://x/ y"])
def test_a_malformed_prefix_is_a_configuration_error(bad: str) -> None:
    with pytest.raises(ModelsFileError, match="AGENTQ_ALLOW_SPEC_ENDPOINTS"):
        UrlPrefix.parse(bad)


# -- key variables -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "key_envs", "expected"),
    [
        ({}, "", ("OPENAI_API_KEY", True)),  # the provider's own endpoint and key
        ({"base_url": "http://127.0.0.1:1/v1"}, "", (None, False)),  # a spec URL gets no key
        ({"base_url": "http://127.0.0.1:1/v1"}, "OPENAI_API_KEY", ("OPENAI_API_KEY", False)),
        ({"api_key_env": "TEAM_KEY"}, "TEAM_KEY", ("TEAM_KEY", True)),
    ],
)
def test_which_key_goes_where(
    fields: dict[str, Any], key_envs: str, expected: tuple[str | None, bool]
) -> None:
    endpoint = policy("http://127.0.0.1:", key_envs).resolve(ref(**fields), PROVIDERS)
    assert (endpoint.key_env, endpoint.key_required) == expected


@pytest.mark.parametrize("var", ["DB_PASSWORD", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY"])
def test_a_spec_names_only_allowed_key_variables(var: str) -> None:
    with pytest.raises(SpecError, match=rf"^model\.api_key_env: '{var}' is not a variable"):
        policy("http://127.0.0.1:", "TEAM_KEY").resolve(ref(api_key_env=var), PROVIDERS)


def test_a_trusted_reference_skips_the_spec_checks() -> None:
    trusted = ref(base_url="http://10.0.0.5/v1", api_key_env="SAMPLING_KEY")
    endpoint = policy().resolve(trusted, PROVIDERS, trusted=True)
    assert (endpoint.base_url, endpoint.key_env) == ("http://10.0.0.5/v1", "SAMPLING_KEY")


# -- addresses after DNS -------------------------------------------------------------


def resolver(*addresses: str) -> Any:
    async def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


@pytest.mark.parametrize(
    ("addresses", "allowed"),
    [
        (["93.184.216.34"], True),
        (["127.0.0.1"], False),
        (["10.1.2.3"], False),
        (["192.168.0.10"], False),
        (["169.254.169.254"], False),  # cloud metadata
        (["100.100.100.200"], False),  # shared address space (a metadata service too)
        (["::1"], False),
        (["fd00:ec2::254"], False),
        (["::ffff:127.0.0.1"], False),
        (["93.184.216.34", "10.0.0.1"], False),  # every address must be public
    ],
)
async def test_a_host_less_prefix_admits_public_addresses_only(
    addresses: list[str], allowed: bool
) -> None:
    rules = policy("https://")
    endpoint = rules.resolve(ref(base_url="https://llm.example/v1"), PROVIDERS)
    if allowed:
        await rules.check_addresses(endpoint, resolver(*addresses))
    else:
        with pytest.raises(SpecError, match="non-public address"):
            await rules.check_addresses(endpoint, resolver(*addresses))


async def test_an_ip_literal_under_a_host_less_prefix_is_checked_too() -> None:
    rules = policy("http://")
    endpoint = rules.resolve(ref(base_url="http://169.254.169.254/latest"), PROVIDERS)
    with pytest.raises(SpecError, match="non-public"):
        await rules.check_addresses(endpoint, resolver("93.184.216.34"))


async def test_a_prefix_naming_a_private_host_allows_it() -> None:
    rules = policy("http://10.0.0.5:8000/v1")
    endpoint = rules.resolve(ref(base_url="http://10.0.0.5:8000/v1"), PROVIDERS)
    await rules.check_addresses(endpoint, resolver("10.0.0.5"))


async def test_a_name_that_does_not_resolve_is_refused() -> None:
    async def fails(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    rules = policy("https://")
    endpoint = rules.resolve(ref(base_url="https://nowhere.invalid/v1"), PROVIDERS)
    with pytest.raises(SpecError, match="cannot resolve"):
        await rules.check_addresses(endpoint, fails)


# -- the models file ---------------------------------------------------------------


@pytest.fixture
def models(tmp_path: Path) -> Path:
    path = tmp_path / "models.json"
    path.write_text(
        json.dumps(
            {
                "endpoints": {
                    "local": {
                        "provider": "openai",
                        "base_url": "http://10.0.0.5:8000/v1",
                        "api_key_env": "LOCAL_KEY",
                        "models": ["llama"],
                        "options": {"temperature": 0},
                    },
                    "openai": {"provider": "openai", "base_url": "https://proxy.example/v1"},
                }
            }
        )
    )
    return path


def test_an_endpoint_of_the_models_file(models: Path) -> None:
    endpoint = policy(models=models).resolve(
        ModelRef.model_validate({"provider": "local", "name": "llama", "options": {"x": 1}}),
        PROVIDERS,
    )
    assert endpoint == Endpoint(
        provider=PROVIDERS["openai"],
        model="llama",
        base_url="http://10.0.0.5:8000/v1",
        key_env="LOCAL_KEY",
        key_required=True,
        options={"temperature": 0, "x": 1},
        endpoint="local",
    )


def test_an_endpoint_named_like_a_provider_redirects_it(models: Path) -> None:
    endpoint = policy(models=models).resolve(ref(), PROVIDERS)
    assert (endpoint.endpoint, endpoint.base_url) == ("openai", "https://proxy.example/v1")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"provider": "local", "name": "gpt-4o"}, r"model\.name: the endpoint 'local' does not"),
        ({"provider": "x", "endpoint": "nope", "name": "m"}, r"model\.endpoint: no endpoint"),
        (
            {"provider": "local", "name": "llama", "base_url": "http://127.0.0.1/"},
            r"model\.base_url: the endpoint 'local' fixes it",
        ),
        (
            {"provider": "local", "name": "llama", "api_key_env": "DB_PASSWORD"},
            r"model\.api_key_env: the endpoint 'local' fixes it",
        ),
    ],
)
def test_what_an_endpoint_refuses(models: Path, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        policy(models=models).resolve(ModelRef.model_validate(fields), PROVIDERS)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ('{"endpoints": {"a": {"base_url": "http://x"}}}', "endpoints.a.provider"),
        ('{"endpoints": {"a": {"provider": "openai", "base_url": "ftp://x"}}}', "base_url"),
        ('{"models": {}}', "models"),
    ],
)
def test_a_bad_models_file_is_one_line_naming_the_field(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "models.json"
    path.write_text(content)
    with pytest.raises(ModelsFileError, match=message):
        load_models_file(path)
