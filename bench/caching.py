"""Prompt caching on a long agent loop: billed-equivalent input cost, caching off vs on.

    python bench/caching.py [--steps 20] [--result-bytes 1024] [--system-tokens 2000]

The same loop (tests/support/caching_loop.py: a 2,000-token system prompt with a tool,
one 1 KB tool result more per step, 20 steps) runs for real (embedded runtime, real HTTP)
against the caching-aware Anthropic and OpenAI Chat fakes (tests/support/fake_cache.py,
which follow the providers' documented rules), with `"cache": "off"` and `"auto"`. Each
step's usage is priced in units of the model's input price, with the published
multipliers: Anthropic cache reads 0.1x, 5-minute cache writes 1.25x; OpenAI cached input
0.5x. OpenAI caches on its own whatever agentq sends, so its baseline is the same tokens
with none of them cached (what a loop whose prefix changed on every step would pay).

Then the cost of placing the breakpoints: `place_breakpoints` alone on the last step's
request body, beside rendering that body and against the wall time of one step of the
loop.

Prints ratios (goals: Anthropic <= 0.35x, OpenAI <= 0.6x, breakpoints <= 1% of a step);
never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from agentq.orchestrator.core.messages import (  # noqa: E402
    AssistantMessage,
    Message,
    ToolCallPart,
    ToolMessage,
    ToolResultPart,
    Usage,
    UserMessage,
)
from agentq.orchestrator.policy.caching import AUTO  # noqa: E402
from agentq.orchestrator.policy.model_ref import ModelRef  # noqa: E402
from agentq.workers.models.anthropic import AnthropicWire  # noqa: E402
from agentq.workers.models.anthropic_cache import place_breakpoints  # noqa: E402
from agentq.workers.models.base import ModelRequest, OfferedTool  # noqa: E402
from tests.support.caching_loop import Loop, fake_for, fetch, run_loop  # noqa: E402

ANTHROPIC_READ, ANTHROPIC_WRITE_5M = 0.1, 1.25
OPENAI_CACHED = 0.5


def anthropic_cost(u: Usage) -> float:
    fresh = u.input_tokens - u.cached_input_tokens - u.cache_write_tokens
    return (
        fresh + ANTHROPIC_READ * u.cached_input_tokens + ANTHROPIC_WRITE_5M * u.cache_write_tokens
    )


def openai_cost(u: Usage) -> float:
    return u.input_tokens - u.cached_input_tokens + OPENAI_CACHED * u.cached_input_tokens


async def run(loop: Loop) -> tuple[list[Usage], float]:
    """The run's per-step usage and its wall time."""
    with fake_for(loop) as server:
        started = time.perf_counter()
        result = await run_loop(loop, server.base_url, timeout_s=300)
        elapsed = time.perf_counter() - started
    if result.status != "succeeded":
        raise SystemExit(f"{loop.provider} cache={loop.cache}: the run {result.status}")
    return [s.usage for s in result.steps], elapsed


def median_s(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def timings(loop: Loop, repeat: int) -> tuple[float, float]:
    """Median times of rendering the last step's Anthropic request without marks, and of
    placing its marks (on fresh copies of the rendered body: the function changes it)."""
    model = ModelRef(provider="anthropic", name="m", options={"cache": "off"})
    spec = loop.spec("http://127.0.0.1:1")
    request = ModelRequest(
        model=model,
        system=spec["system"],
        messages=last_history(loop),
        tools=[OfferedTool(name="fetch", input_schema={"type": "object"})],
    )
    wire = AnthropicWire()
    render = median_s(lambda: wire.body(request, False), repeat)
    bodies = iter([wire.body(request, False) for _ in range(repeat)])
    place = median_s(lambda: place_breakpoints(next(bodies), AUTO), repeat)
    return render, place


def last_history(loop: Loop) -> list[Message]:
    """The history the loop's last step sends."""
    out: list[Message] = [UserMessage(content="Read the report page by page.")]
    for n in range(loop.steps - 1):
        call = ToolCallPart(tool_call_id=f"c{n}", tool_name="fetch", input={"page": n})
        result = fetch.fn(page=n, size=loop.result_bytes)
        out.append(AssistantMessage(content=[call]))
        part = ToolResultPart(tool_call_id=f"c{n}", tool_name="fetch", output=result)
        out.append(ToolMessage(content=[part]))
    return out


def line(name: str, steps: list[Usage], cost: float) -> str:
    total = sum(u.input_tokens for u in steps)
    cached = sum(u.cached_input_tokens for u in steps)
    written = sum(u.cache_write_tokens for u in steps)
    return (
        f"  {name:<26} input {total:>8,}  cached {cached:>8,}  written {written:>7,}"
        f"  billed {cost:>10,.0f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--result-bytes", type=int, default=1024)
    parser.add_argument("--system-tokens", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2000, help="timings of the breakpoints")
    args = parser.parse_args()
    shape = {
        "steps": args.steps,
        "result_bytes": args.result_bytes,
        "system_tokens": args.system_tokens,
    }
    print(
        f"{args.steps}-step loop, {args.system_tokens}-token system prompt with a tool, "
        f"{args.result_bytes} B per tool result; billed input in units of the input price"
    )

    off, _ = await run(Loop("anthropic", cache="off", **shape))
    on, on_s = await run(Loop("anthropic", cache="auto", **shape))
    base, cost = sum(map(anthropic_cost, off)), sum(map(anthropic_cost, on))
    print("Anthropic (read 0.1x, 5-minute write 1.25x):")
    print(line("caching off", off, base))
    print(line("caching on (rolling marks)", on, cost))
    print(f"  ratio on/off: {cost / base:.3f}x (goal <= 0.35x)")

    openai_off, _ = await run(Loop("openai", cache="off", **shape))
    openai_on, _ = await run(Loop("openai", cache="auto", **shape))
    uncached = [u.model_copy(update={"cached_input_tokens": 0}) for u in openai_on]
    base, cost = sum(map(openai_cost, uncached)), sum(map(openai_cost, openai_on))
    print("OpenAI Chat Completions (cached input 0.5x):")
    print(line("nothing cached", uncached, base))
    print(line("caching on (one key a run)", openai_on, cost))
    print(line('"off" (no key; cached anyway)', openai_off, sum(map(openai_cost, openai_off))))
    print(f"  ratio on/uncached: {cost / base:.3f}x (goal <= 0.6x)")

    render, placing = timings(Loop("anthropic", **shape), args.repeat)
    step = on_s / args.steps
    print(f"Breakpoints (Anthropic, the last step's request; medians of {args.repeat}):")
    print(f"  place_breakpoints: {placing * 1e6:.1f} us")
    print(f"  rendering the request body without them: {render * 1e6:.1f} us")
    print(f"  a step of the loop (embedded runtime, fake over HTTP): {step * 1e3:.2f} ms")
    print(f"  overhead: {placing / step * 100:.3f}% of a step (goal <= 1%)")


if __name__ == "__main__":
    asyncio.run(main())
