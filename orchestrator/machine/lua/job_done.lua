-- job_done: a worker's job that ended done leaves arq's keys and its queue (take.lua's
--   end of a done job, and job_end.lua's, inside its last transition).
-- Needs: nothing.
-- Defines: job_done(queue, id, ours, progress_prefix, retry_prefix, job_prefix). `ours`:
--   the job was still this worker's (its lease record was here, or its in-progress key
--   names the worker), so its in-progress key goes too; else another holder's stays.
local function job_done(queue, id, ours, progress_prefix, retry_prefix, job_prefix)
  if ours then
    redis.call('DEL', progress_prefix .. id, retry_prefix .. id, job_prefix .. id)
  else
    redis.call('DEL', retry_prefix .. id, job_prefix .. id)
  end
  redis.call('ZREM', queue, id)
end
