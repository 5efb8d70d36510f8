"""Prompt caching on a long agent loop: billed-equivalent input cost, caching off vs on.

    python bench/caching.py [--quick] [--prices FILE] [--steps 20] [--result-bytes 1024]
                            [--system-tokens 2000]

The same loop (tests/support/caching_loop.py: a 2,000-token system prompt with a tool,
one 1 KB tool result more per step, 20 steps) runs for real (embedded runtime, real HTTP)
against the caching-aware Anthropic and OpenAI Chat fakes (tests/support/fake_cache.py,
which follow the providers' documented rules), with `"cache": "off"` and `"auto"`. Each
step's prompt is priced in USD from the price table (orchestrator/cost/: the built-in
list prices of the models the loop uses, claude-sonnet-4-5 and gpt-4o, or the entries of
`--prices FILE`, a table as AGENTQ_PRICES takes): uncached input, cache reads and cache
writes each at its own price. OpenAI caches on its own whatever agentq sends, so its
baseline is the same tokens with none of them cached (what a loop whose prefix changed on
every step would pay).

Then the cost of placing the breakpoints: `place_breakpoints` alone on the last step's
request body, beside rendering that body and against the wall time of one step of the
loop.

Prints ratios, each goal with PASS or FAIL (Anthropic <= 0.35x, OpenAI <= 0.6x,
breakpoints <= 1% of a step); never asserts. `--quick` times one run and 200 placements.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

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
from agentq.orchestrator.cost.compute import Tokens, cost_of  # noqa: E402
from agentq.orchestrator.cost.prices import Price, Prices, PricesFileError, load_prices  # noqa: E402
from agentq.orchestrator.policy.caching import AUTO  # noqa: E402
from agentq.orchestrator.policy.model_ref import ModelRef  # noqa: E402
from agentq.workers.models.anthropic import AnthropicWire  # noqa: E402
from agentq.workers.models.anthropic_cache import place_breakpoints  # noqa: E402
from agentq.workers.models.base import ModelRequest, OfferedTool  # noqa: E402
from tests.support.caching_loop import (  # noqa: E402
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    Loop,
    fake_for,
    fetch,
    run_loop,
)

GOALS = {"anthropic": 0.35, "openai": 0.6}  # caching on / off, billed input
OVERHEAD_GOAL = 0.01  # placing the breakpoints, of a step's wall time


@dataclass(frozen=True)
class Priced:
    """The price a provider's loop is billed at, and where it came from."""

    key: str  # "provider:model"
    price: Price
    source: str


def price_for(prices: Prices, provider: str, model: str, file: str | None) -> Priced:
    """The model's price (the file's entry, else the built-in list price); exit 2 if none."""
    own = prices.deployment.lookup([provider], model)
    price = own or prices.defaults.lookup([provider], model)
    if price is None:
        where = f"{file} or the built-in prices" if file else "the built-in prices"
        refuse(f"no price for {provider}:{model} in {where}")
    source = f"from {file}" if own is not None else "built-in default, may be stale"
    return Priced(f"{provider}:{model}", price, source)


def refuse(message: str) -> NoReturn:
    """Bad input: one line and exit 2, as agentq's own commands do."""
    print(f"caching.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def input_usd(price: Price, steps: list[Usage]) -> float:
    """What the steps' prompts are billed, in USD: uncached input, cache reads and cache
    writes, each at its price (the answer's tokens are the same either way)."""
    total = 0.0
    for usage in steps:
        cost = cost_of(price, Tokens.of(usage))
        total += cost.input_usd + cost.cached_input_usd + cost.cache_write_usd
    return total


def verdict(value: float, goal: float) -> str:
    return "PASS" if value <= goal else "FAIL"


def per_million(value: float | None, fallback: float) -> str:
    return f"${fallback if value is None else value:g}"


def describe(priced: Priced) -> str:
    p = priced.price
    return (
        f"{priced.key} ({priced.source}): input {per_million(p.input, p.input)}/M, "
        f"cache read {per_million(p.cached_input, p.input)}/M, "
        f"cache write {per_million(p.cache_write, p.input)}/M"
    )


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


def line(name: str, steps: list[Usage], usd: float) -> str:
    total = sum(u.input_tokens for u in steps)
    cached = sum(u.cached_input_tokens for u in steps)
    written = sum(u.cache_write_tokens for u in steps)
    return (
        f"  {name:<30} input {total:>8,}  cached {cached:>8,}  written {written:>7,}"
        f"  billed ${usd:>9.6f}"
    )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Prints PASS or FAIL against each goal; never exits non-zero on a FAIL.",
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--result-bytes", type=int, default=1024)
    parser.add_argument("--system-tokens", type=int, default=2000)
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help="a price table as AGENTQ_PRICES takes (default: the built-in list prices)",
    )
    parser.add_argument("--repeat", type=int, default=2000, help="timings of the breakpoints")
    parser.add_argument("--runs", type=int, default=3, help="runs timed for a step's wall time")
    parser.add_argument(
        "--quick", action="store_true", help="one timed run, 200 timings (well under 30 s)"
    )
    args = parser.parse_args()
    if args.quick:
        args.repeat, args.runs = 200, 1
    return args


async def main() -> None:
    args = arguments()
    try:
        prices = load_prices(args.prices)
    except PricesFileError as exc:
        refuse(str(exc))
    anthropic = price_for(prices, "anthropic", ANTHROPIC_MODEL, args.prices)
    openai = price_for(prices, "openai", OPENAI_MODEL, args.prices)
    shape = {
        "steps": args.steps,
        "result_bytes": args.result_bytes,
        "system_tokens": args.system_tokens,
    }
    print(
        f"{args.steps}-step loop, {args.system_tokens}-token system prompt with a tool, "
        f"{args.result_bytes} B per tool result; billed input in USD at the price table"
    )

    off, _ = await run(Loop("anthropic", cache="off", **shape))
    runs = [await run(Loop("anthropic", cache="auto", **shape)) for _ in range(args.runs)]
    on = runs[0][0]
    base, cost = input_usd(anthropic.price, off), input_usd(anthropic.price, on)
    print(f"Anthropic, {describe(anthropic)}:")
    print(line("caching off", off, base))
    print(line("caching on (rolling marks)", on, cost))
    ratio = cost / base
    goal = GOALS["anthropic"]
    print(f"  ratio on/off: {ratio:.3f}x (goal <= {goal}x) {verdict(ratio, goal)}")

    openai_off, _ = await run(Loop("openai", cache="off", **shape))
    openai_on, _ = await run(Loop("openai", cache="auto", **shape))
    uncached = [u.model_copy(update={"cached_input_tokens": 0}) for u in openai_on]
    base, cost = input_usd(openai.price, uncached), input_usd(openai.price, openai_on)
    print(f"OpenAI Chat Completions, {describe(openai)}:")
    print(line("caching off (nothing cached)", uncached, base))
    print(line("caching on (one key a run)", openai_on, cost))
    print(line('"off" (no key; cached anyway)', openai_off, input_usd(openai.price, openai_off)))
    ratio = cost / base
    goal = GOALS["openai"]
    print(f"  ratio on/off: {ratio:.3f}x (goal <= {goal}x) {verdict(ratio, goal)}")

    render, placing = timings(Loop("anthropic", **shape), args.repeat)
    step = statistics.median(elapsed for _, elapsed in runs) / args.steps
    overhead = placing / step
    print(f"Breakpoints (Anthropic, the last step's request; medians of {args.repeat}):")
    print(f"  place_breakpoints: {placing * 1e6:.1f} us")
    print(f"  rendering the request body without them: {render * 1e6:.1f} us")
    print(
        f"  a step of the loop (embedded runtime, fake over HTTP; median of {args.runs} runs): "
        f"{step * 1e3:.2f} ms"
    )
    print(
        f"  overhead: {overhead * 100:.3f}% of a step (goal <= {OVERHEAD_GOAL:.0%}) "
        f"{verdict(overhead, OVERHEAD_GOAL)}"
    )


if __name__ == "__main__":
    asyncio.run(main())
