"""The HTTP tool against a real HTTP server on loopback: the URL template, query, JSON
body and secret headers; the SSRF guard (loopback, metadata, private addresses after
DNS, redirects to them) and the response cap. No Redis: the executor is called directly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentq.orchestrator.core.errors import SpecError, ToolError
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.policy.endpoints import non_public
from agentq.orchestrator.spec.resolution import resolve_tools
from agentq.orchestrator.spec.run import RunSpec
from agentq.orchestrator.tools import ToolAnnouncement, ToolDef, registry_key, tool_needs
from agentq.orchestrator.tools.http import HTTP_EXECUTOR_KIND
from agentq.workers.tools.context import ToolContext
from agentq.workers.tools.http import HttpExecutor
from tests.support.http_target import HttpTarget

pytestmark = pytest.mark.integration

SERVES = ToolAnnouncement(name="http", kind=HTTP_EXECUTOR_KIND, queue="tools")
REGISTRY = {registry_key(SERVES): SERVES}


@pytest.fixture
def target() -> Iterator[HttpTarget]:
    server = HttpTarget()
    yield server
    server.close()


def http_tool(settings: Settings, **entry: Any) -> ToolDef:
    spec = RunSpec.model_validate(
        {"model": "openai:m", "prompt": "p", "tools": [{"type": "http", "name": "fetch", **entry}]}
    )
    (tool,) = resolve_tools(spec, REGISTRY, 0.0, settings=settings)
    return tool


async def call(
    settings: Settings, tool: ToolDef, input: dict[str, Any], env: dict[str, str] | None = None
) -> Any:
    executor = HttpExecutor(settings, env or {})
    ctx = ToolContext(run_id="r", step=0, call_id="c", tool=tool, attempt=1, deadline_at=0.0)
    return await executor.execute(tool, input, ctx)


LOOPBACK = Settings(allow_http_hosts="127.0.0.1", allow_http_envs="TOKEN")
PUBLIC = Settings(allow_http_hosts="*")


async def test_its_calls_go_only_to_workers_that_run_http_tools() -> None:
    # A call's job needs what the claim finds in the tool set of a worker with the
    # executor (its announcements' registry keys), and nothing a worker without has.
    (served,) = await HttpExecutor(PUBLIC, {}).announcements("tools")
    assert tool_needs(http_tool(PUBLIC, url="https://example.com/x")) == registry_key(served)


async def test_inputs_fill_the_url_query_and_body_and_headers_read_allowed_env(
    target: HttpTarget,
) -> None:
    base = f"http://127.0.0.1:{target.port}"
    get = http_tool(
        LOOPBACK,
        url=base + "/items/{id}",
        headers={"Authorization": "Bearer ${env:TOKEN}"},
    )
    out = await call(LOOPBACK, get, {"id": "a b/c", "q": "x"}, env={"TOKEN": "t0k"})
    assert out["status"] == 200
    assert out["headers"]["content-type"] == "application/json"
    assert out["body"]["path"] == "/items/a%20b%2Fc"
    assert out["body"]["query"] == {"q": ["x"]}
    assert out["body"]["authorization"] == "Bearer t0k"
    post = http_tool(LOOPBACK, method="POST", url=base + "/items")
    posted = await call(LOOPBACK, post, {"n": 1, "tags": ["a"]})
    assert posted["body"]["json"] == {"n": 1, "tags": ["a"]}


async def test_the_urls_own_query_string_is_kept(target: HttpTarget) -> None:
    base = f"http://127.0.0.1:{target.port}"
    fixed = http_tool(LOOPBACK, url=base + "/items/{id}?api-version=2&tag=a")
    alone = await call(LOOPBACK, fixed, {"id": "x"})
    assert alone["body"]["query"] == {"api-version": ["2"], "tag": ["a"]}
    more = await call(LOOPBACK, fixed, {"id": "x", "q": "y", "tag": "b"})
    assert more["body"]["query"] == {"api-version": ["2"], "tag": ["a", "b"], "q": ["y"]}
    post = http_tool(LOOPBACK, method="POST", url=base + "/items?api-version=2")
    posted = await call(LOOPBACK, post, {"n": 1})
    assert posted["body"]["query"] == {"api-version": ["2"]}


def test_a_header_may_name_only_variables_the_deployment_allows() -> None:
    with pytest.raises(SpecError, match=r"tools\[0\]\.headers\.X-Key: \$\{env:AWS_SECRET\}"):
        http_tool(LOOPBACK, url="http://127.0.0.1/x", headers={"X-Key": "${env:AWS_SECRET}"})


@pytest.mark.parametrize(
    ("settings", "url", "match"),
    [
        (Settings(), "https://api.example.com/x", "allows no hosts here"),
        (Settings(allow_http_hosts="api.example.com"), "https://evil.example/x", "not allowed"),
        (LOOPBACK, "http://{host}/x", "may not be a placeholder"),
    ],
)
def test_submit_refuses_hosts_the_deployment_does_not_allow(
    settings: Settings, url: str, match: str
) -> None:
    with pytest.raises(SpecError, match=match):
        http_tool(settings, url=url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/items/1",  # loopback, allowed only by a wildcard
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
        "http://localhost:{port}/items/1",  # resolves to loopback
    ],
)
async def test_non_public_addresses_are_refused_unless_named(target: HttpTarget, url: str) -> None:
    tool = http_tool(PUBLIC, url=url.format(port=target.port))
    with pytest.raises(ToolError, match="non-public address"):
        await call(PUBLIC, tool, {})
    assert target.hits == []


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254 (cloud metadata)
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "64:ff9b:1::a00:1",  # local-use NAT64 (RFC 8215): the operator's own networks
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
        "::a00:1",  # IPv4-compatible 10.0.0.1
    ],
)
async def test_an_ipv6_address_embedding_a_private_ipv4_is_refused(address: str) -> None:
    """A public-looking name resolving to an IPv6 address that a NAT64 gateway or a 6to4
    relay turns into a private IPv4 one: the guard judges the IPv4 inside."""
    connected: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        connected.append(host)
        return [address]

    tool = http_tool(PUBLIC, url="http://api.example.com/x")
    executor = HttpExecutor(PUBLIC, {}, resolve=resolve)
    ctx = ToolContext(run_id="r", step=0, call_id="c", tool=tool, attempt=1, deadline_at=0.0)
    with pytest.raises(ToolError, match="non-public address"):
        await executor.execute(tool, {}, ctx)
    assert connected == ["api.example.com"]  # resolved, checked, never connected


@pytest.mark.parametrize(
    ("address", "private"),
    [
        ("64:ff9b::808:808", False),  # NAT64 of 8.8.8.8
        ("2002:808:808::1", False),  # 6to4 of 8.8.8.8
        ("2606:4700::1111", False),
        ("64:ff9b::7f00:1", True),
        ("::ffff:10.0.0.1", True),
        ("::1", True),
    ],
)
def test_embedded_ipv4_addresses_are_judged_by_the_ipv4(address: str, private: bool) -> None:
    assert non_public(address) is private


async def test_a_redirect_to_a_private_address_is_refused(target: HttpTarget) -> None:
    base = f"http://127.0.0.1:{target.port}"
    settings = Settings(allow_http_hosts="127.0.0.1,*")
    for to in ("http://169.254.169.254/latest/meta-data/", f"http://localhost:{target.port}/"):
        tool = http_tool(
            settings,
            url=base + "/redirect",
            allow_hosts=["127.0.0.1", "localhost", "169.254.169.254"],
        )
        with pytest.raises(ToolError, match="non-public address"):
            await call(settings, tool, {"to": to})
    assert target.hits == [
        "/redirect?to=http%3A%2F%2F169.254.169.254%2Flatest%2Fmeta-data%2F",
        f"/redirect?to=http%3A%2F%2Flocalhost%3A{target.port}%2F",
    ]


async def test_a_redirect_outside_allow_hosts_is_refused_and_inside_followed(
    target: HttpTarget,
) -> None:
    base = f"http://127.0.0.1:{target.port}"
    tool = http_tool(LOOPBACK, url=base + "/redirect")
    followed = await call(LOOPBACK, tool, {"to": base + "/items/7"})
    assert followed["body"]["path"] == "/items/7"
    with pytest.raises(ToolError, match="not in the tool's allow_hosts"):
        await call(LOOPBACK, tool, {"to": "http://example.com/"})


async def test_the_checked_address_is_the_one_connected(target: HttpTarget) -> None:
    # A name the deployment names exactly may be private; its checked address is pinned
    # (here "api.internal" exists in no DNS: only the pinned address can be reached).
    settings = Settings(allow_http_hosts="api.internal")

    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    tool = http_tool(settings, url=f"http://api.internal:{target.port}/items/9")
    executor = HttpExecutor(settings, {}, resolve=resolve)
    ctx = ToolContext(run_id="r", step=0, call_id="c", tool=tool, attempt=1, deadline_at=0.0)
    out = await executor.execute(tool, {}, ctx)
    assert out["body"]["path"] == "/items/9"


async def test_a_large_response_is_cut(target: HttpTarget) -> None:
    tool = http_tool(LOOPBACK, url=f"http://127.0.0.1:{target.port}/big", max_response_bytes=100)
    out = await call(LOOPBACK, tool, {})
    assert out["truncated"] is True
    assert out["body"] == "x" * 100


async def test_a_run_calls_an_http_tool_on_a_worker(redis_url: str, target: HttpTarget) -> None:
    from agentq.orchestrator.client import Client
    from tests.support.infra import TOOLS, WorkerProcess, wait_ready
    from tests.support.specs import calls, scripted

    allowed = {"AGENTQ_ALLOW_HTTP_HOSTS": "127.0.0.1"}
    worker = WorkerProcess(redis_url, "--tools", TOOLS, env=allowed)
    try:
        wait_ready(worker)
        spec = scripted(
            calls(("item", {"id": 5})),
            {"text": "done"},
            tools=[
                {"type": "http", "name": "item", "url": f"http://127.0.0.1:{target.port}/i/{{id}}"}
            ],
        )
        settings = Settings(redis_url=redis_url, allow_http_hosts="127.0.0.1")
        async with Client(redis_url, settings=settings) as client:
            result = await client.runs.wait(await client.runs.submit(spec), timeout_s=60)
        assert result.status == "succeeded", result.error
        (output,) = [r.output for r in result.steps[0].tool_results]
        assert (output["status"], output["body"]["path"]) == (200, "/i/5")
    finally:
        worker.stop()
