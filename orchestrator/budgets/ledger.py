"""Shared budgets as Redis keeps them: each budget's limits, each scope's spend summed over
the partitions, and the runs a budget holds; read in one round trip before a step.

A batch's budget is two fields of its meta hash (its retention is the batch's); a tenant's
is the deployment's entry (tenants.py) unless the operator raised it, in
`keys.tenant_budgets()`. Spend is written by the run transitions only (see __init__.py).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from redis.asyncio import Redis

from agentq.orchestrator.budgets.shared import (
    WINDOW_TTL_S,
    Reached,
    Scope,
    SharedBudget,
    Spend,
    judge,
    window,
)
from agentq.orchestrator.budgets.tenants import budget_for, tenant_budgets
from agentq.orchestrator.core import keys
from agentq.orchestrator.core.messages import CostBreakdown
from agentq.orchestrator.core.settings import Settings
from agentq.orchestrator.machine.store import resolved, text
from agentq.orchestrator.redis.faults import redis_errors_mapped

# How long a worker takes a batch without a budget to have none: every step of a batch's
# run is checked, and most batches have no budget, so the read is skipped for this long
# (a budget set later holds their steps this much later). A batch with one is read at
# every step: its spend must be fresh.
UNBUDGETED_TTL_S = 1.0
_UNBUDGETED_MAX = 10_000
# A batch's budget in its meta hash, by limit.
BATCH_FIELDS = {"max_cost_usd": "budget_usd", "max_total_tokens": "budget_tokens"}
# A scope's spend in the usage hashes, after its prefix: tokens, then cost by kind.
_SPEND_FIELDS = ("total_tokens", *CostBreakdown.model_fields)


def _usage_key(scope: Scope, partition: int) -> str:
    if scope.kind == "batch":
        return keys.batch_usage(scope.tenant, str(scope.batch), partition)
    if scope.window is not None:
        return keys.tenant_window_usage(scope.window, partition)
    return keys.tenant_usage(partition)


def _prefix(scope: Scope) -> str:
    # As commit_step.lua names the fields: a tenant's behind its name; a batch's key is its own.
    return scope.tenant + keys.JOB_SEPARATOR if scope.kind == "tenant" else ""


def spend_of(rows: Sequence[Sequence[Any]]) -> Spend:
    """One scope's spend from its partitions' rows (`_SPEND_FIELDS` each), summed."""
    tokens, usd = 0, 0.0
    for row in rows:
        tokens += int(row[0] or 0)
        usd += sum(float(v or 0) for v in row[1:])
    return Spend(cost_usd=round(usd, 9), total_tokens=tokens)


def batch_budget(meta: Mapping[str, str]) -> SharedBudget | None:
    """A batch's budget from its meta hash (None: none set)."""
    usd, tokens = meta.get(BATCH_FIELDS["max_cost_usd"]), meta.get(BATCH_FIELDS["max_total_tokens"])
    if usd is None and tokens is None:
        return None
    return SharedBudget(
        max_cost_usd=float(usd) if usd else None,
        max_total_tokens=int(tokens) if tokens else None,
    )


class BudgetLedger:
    """The shared budgets of one deployment (its settings' tenant budgets) on one Redis."""

    def __init__(
        self, redis: Redis, settings: Settings, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.redis = redis
        self.tenants = tenant_budgets(settings.tenant_budgets)
        self.clock = clock
        self._unbudgeted: dict[str, float] = {}  # scope id -> until when (monotonic)

    def tenant_scope(self, tenant: str) -> Scope:
        """The tenant's budget's scope now: with the window its period counts in (the
        deployment's entry decides the period; a raise changes only the limits)."""
        entry = budget_for(self.tenants, tenant)
        return Scope("tenant", tenant, window=window(entry.period if entry else None, self.clock()))

    def windows(self, tenant: str) -> tuple[list[str], int]:
        """The windows a step of the tenant's counts in now besides its total, and how long
        their totals are kept: its budget's, when that has a period."""
        entry = budget_for(self.tenants, tenant)
        now = self.tenant_scope(tenant).window
        if entry is None or entry.period is None or now is None:
            return [], 0
        return [now], WINDOW_TTL_S[entry.period]

    def scopes(self, tenant: str, batch: str | None) -> list[Scope]:
        """The budgets a run's step may be held by: its batch's (if any may be set) and its
        tenant's (if the deployment gives it one). Pure: a run with neither costs no read."""
        scopes = [Scope("batch", tenant, batch)] if batch else []
        if budget_for(self.tenants, tenant) is not None:
            scopes.append(self.tenant_scope(tenant))
        return scopes

    async def reached(self, tenant: str, batch: str | None) -> Reached | None:
        """The first of the run's budgets that lets no new step start, read in one round
        trip (each budget and its spend over every partition)."""
        now = time.monotonic()
        scopes = [s for s in self.scopes(tenant, batch) if self._unbudgeted.get(s.id, 0) < now]
        if not scopes:
            return None
        found = await self._read(scopes)
        for scope, (budget, spend) in zip(scopes, found, strict=True):
            if budget is None:
                self._remember_unbudgeted(scope, now)
                continue
            reached = judge(scope, budget, spend)
            if reached is not None:
                return reached
        return None

    def _remember_unbudgeted(self, scope: Scope, now: float) -> None:
        if len(self._unbudgeted) >= _UNBUDGETED_MAX:
            self._unbudgeted = {k: t for k, t in self._unbudgeted.items() if t > now}
        self._unbudgeted[scope.id] = now + UNBUDGETED_TTL_S

    async def status(self, scope: Scope) -> tuple[SharedBudget | None, Spend]:
        """A scope's budget in force (None: none) and its spend."""
        return (await self._read([scope]))[0]

    async def _read(self, scopes: Sequence[Scope]) -> list[tuple[SharedBudget | None, Spend]]:
        parts = list(keys.partitions())
        with redis_errors_mapped():
            rows = await self._rows(scopes, parts)
        found: list[tuple[SharedBudget | None, Spend]] = []
        for i, scope in enumerate(scopes):
            head = rows[i * (1 + len(parts))]
            spends = rows[i * (1 + len(parts)) + 1 :][: len(parts)]
            found.append((self._budget(scope, head), spend_of(spends)))
        return found

    async def _rows(self, scopes: Sequence[Scope], parts: Sequence[int]) -> list[Any]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for scope in scopes:
                if scope.kind == "batch":
                    pipe.hmget(
                        keys.batch_meta(scope.tenant, str(scope.batch)), list(BATCH_FIELDS.values())
                    )
                else:
                    pipe.hget(keys.tenant_budgets(), scope.tenant)
                for p in parts:
                    pipe.hmget(_usage_key(scope, p), [_prefix(scope) + f for f in _SPEND_FIELDS])
            return cast(list[Any], await cast(Awaitable[Any], pipe.execute()))

    def _budget(self, scope: Scope, stored: Any) -> SharedBudget | None:
        if scope.kind == "batch":
            values = [None if v is None else text(v) for v in stored]
            return batch_budget(
                {f: v for f, v in zip(BATCH_FIELDS.values(), values, strict=True) if v is not None}
            )
        if stored is not None:
            return SharedBudget.model_validate_json(text(stored))
        return budget_for(self.tenants, scope.tenant)

    async def set_budget(self, scope: Scope, budget: SharedBudget) -> SharedBudget:
        """Raise (or lower) a scope's budget: the limits `budget` sets replace those in
        force; the budget now in force. The caller sends the held steps on."""
        current, _ = await self.status(scope)
        now = (current or SharedBudget()).raised(budget)
        if scope.kind == "batch":
            fields = {
                BATCH_FIELDS[name]: value
                for name, value in now.model_dump(exclude_none=True).items()
            }
            key = keys.batch_meta(scope.tenant, str(scope.batch))
            with redis_errors_mapped():
                await resolved(self.redis.hset(key, mapping=fields))
        else:
            with redis_errors_mapped():
                await resolved(
                    self.redis.hset(keys.tenant_budgets(), scope.tenant, now.model_dump_json())
                )
        return now

    async def held(self, scope: Scope) -> list[str]:
        """The runs a scope's budget holds now, over every partition."""
        with redis_errors_mapped():
            async with self.redis.pipeline(transaction=False) as pipe:
                for p in keys.partitions():
                    pipe.hgetall(keys.budgets_held(p))
                rows = cast(list[dict[Any, Any]], await cast(Awaitable[Any], pipe.execute()))
        return [text(run) for row in rows for run, held in row.items() if text(held) == scope.id]
