-- hold_step: a begun step that a shared budget (a batch's, a tenant's: orchestrator/budgets/)
-- holds: no model call starts; the step waits for the budget to be raised.
-- KEYS    meta, msgs, events (see prelude)
-- ARGV    HoldStep: step, scope (the budget's), event (`step-held`), recheck_ms
-- Replies HELD
--         UNKNOWN_RUN | CLOSED | STALE
--         DUPLICATE  the step was committed already
-- Effects the run's hold (its meta and its partition's held hash, read by the raise that
--         sends its step on); the event once per hold (a recheck that holds it again under
--         the same scope sends none); the run scored in the moving index `recheck_ms`
--         ahead, so the sweeper sends the step again then (a raise lost, a window that
--         rolled over) if nothing did before.
local err, run = run_guard(A.step, F.COMMITTED, F.BUDGET_HELD)
if err then return reply(err) end
if step_committed(A.step, run[8]) then return reply(OUT.DUPLICATE) end
if run[9] ~= A.scope then
  redis.call('HSET', meta, F.BUDGET_HELD, A.scope)
  redis.call('HSET', held_key(), A.run_id, A.scope)
  emit(A.event)
end
redis.call('ZADD', moving_key, now_ms() + A.recheck_ms, A.run_id)
unmoved()
return reply(OUT.HELD)
