"""bench/caching.py as a user runs it: its figures are USD at the price table it was
given (`--prices FILE`, over the built-in defaults), its goals PASS or FAIL, and a bad table
is one line and exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.infra import REPO

pytestmark = pytest.mark.e2e

BENCH = REPO / "bench" / "caching.py"
# Per million tokens: round figures, far from the built-in list prices.
PRICES: dict[str, dict[str, float]] = {
    "anthropic:claude-sonnet-4*": {
        "input": 10,
        "cached_input": 1,
        "cache_write": 12.5,
        "output": 50,
    },
    "openai:gpt-4o": {"input": 4, "cached_input": 2, "output": 16},
}
ROW = re.compile(
    r"^  (?P<name>.+?)\s+input\s+(?P<input>[\d,]+)\s+cached\s+(?P<cached>[\d,]+)"
    r"\s+written\s+(?P<written>[\d,]+)\s+billed \$\s*(?P<usd>[\d.]+)$"
)


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
        timeout=120,
    )


def rows(section: str) -> dict[str, dict[str, float]]:
    out = {}
    for text in section.splitlines():
        if match := ROW.match(text):
            tokens = {k: float(match[k].replace(",", "")) for k in ("input", "cached", "written")}
            out[match["name"]] = {**tokens, "usd": float(match["usd"])}
    return out


def billed(row: dict[str, float], price: dict[str, float]) -> float:
    fresh = row["input"] - row["cached"] - row["written"]
    cached, written = price.get("cached_input", price["input"]), price.get("cache_write", 0)
    return (fresh * price["input"] + row["cached"] * cached + row["written"] * written) / 1e6


def test_quick_prices_at_the_given_table_and_judges_the_goals(tmp_path: Path) -> None:
    table = tmp_path / "prices.json"
    table.write_text(json.dumps(PRICES))
    done = bench("--quick", "--prices", str(table))
    assert done.returncode == 0, done.stderr
    anthropic, rest = done.stdout.split("OpenAI Chat Completions", 1)
    openai, _ = rest.split("Breakpoints", 1)
    assert f"from {table}" in anthropic
    assert f"from {table}" in openai
    for section, price in ((anthropic, "anthropic:claude-sonnet-4*"), (openai, "openai:gpt-4o")):
        found = rows(section)
        assert len(found) >= 2, section
        for row in found.values():
            assert row["usd"] == pytest.approx(billed(row, PRICES[price]), abs=2e-6)
    verdicts = re.findall(r"\(goal <= ([\d.%]+x?)\) (PASS|FAIL)$", done.stdout, re.MULTILINE)
    assert [goal for goal, _ in verdicts] == ["0.35x", "0.6x", "1%"]


def test_help_and_a_bad_table(tmp_path: Path) -> None:
    shown = bench("--help")
    assert shown.returncode == 0
    assert "--prices FILE" in shown.stdout
    assert "--quick" in shown.stdout
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps({"x:y": {"input": "free"}}))
    refused = bench("--quick", "--prices", str(bad))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"caching.py: prices file {bad}: x:y.input: Input should be a valid number, "
        "unable to parse string as a number"
    ]
