-- run_end: a run's end told to the worker processes that need it at once (issue 31).
-- Needs: K.RUN_ENDED, K.RUN_ENDED_TO, K.ARQ_IN_PROGRESS.
-- Defines: tell_run_end(run_id, job_ids): each job's holder (its in-progress key names
--   the worker process that claimed it, claims.py) is told on its own channel, once,
--   so a cancelled job is aborted now rather than at its worker's fallback poll; and the
--   processes whose executors keep something for runs between calls (sandbox sessions),
--   which listen on the fleet's channel. A process holding nothing of the run hears
--   nothing: the notices per run end do not grow with the fleet.
local function tell_run_end(run_id, job_ids)
  local told = {}
  for _, id in ipairs(job_ids) do
    local holder = redis.call('GET', K.ARQ_IN_PROGRESS .. id)
    if holder and not told[holder] then
      told[holder] = true
      redis.call('PUBLISH', K.RUN_ENDED_TO .. holder, run_id)
    end
  end
  redis.call('PUBLISH', K.RUN_ENDED, run_id)
end
