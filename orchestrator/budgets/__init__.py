"""Shared budgets: what a batch or a tenant may spend, in USD and tokens, across the fleet.

    shared.py   the budget, its scope, what was spent and whether it is reached (pure)
    tenants.py  the deployment's tenant budgets (AGENTQ_TENANT_BUDGETS), pure
    ledger.py   budgets and spend as Redis keeps them: read, raised, and the runs held

Where the spend lives, and why it is exact: every model step's usage is added to its
tenant's and (a batch line's run) its batch's totals by `commit_step`, the transition that
records the step, in the run's partition (`keys.tenant_usage`, `keys.batch_usage`). A
re-delivered commit is refused as a duplicate, so a step is charged once, and a step
recorded is never left uncharged, whichever worker dies when. A budget's spend sums the
partitions.

What a budget reached does: a worker checks the run's budgets before each model step, in
the same place as the run's own limits (workers/steps/phases.py: begin). Reached, the step
is held (`hold_step`: a `step-held` event, the run in its partition's held hash) and no
model call starts; steps already calling their model finish and are charged, so the
spend stops within one step per running run. Raising the budget sends the held steps on
(runs/held.py), and the sweeper rechecks a held run every AGENTQ_BUDGET_RECHECK_S.
"""
