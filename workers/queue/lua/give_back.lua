-- give_back: jobs a live worker holds but never started, because the reply of the claim
--   that took them was lost (it timed out while Redis was stalled, or its connection
--   dropped, and Redis ran the claim anyway). Nobody else would ever free them: the
--   worker's lease is renewed, so no reaper looks at its jobs.
-- KEYS    the worker's jobs hash in one partition (its slot).
-- ARGV    [1] the worker id, [2] in-progress prefix, [3] the queue whose claims these
--         are (a worker process holds the jobs of all its queues in one hash; each
--         queue's loop numbers its own claims and knows its own jobs), [4] that loop's
--         last settled claim (claims after it may still be answered: their jobs are left
--         alone), [5...] the ids of the jobs it is running.
-- Replies how many jobs it gave back.
-- Effects each such job released as a release does (back in its lane at its score, its queue
--         woken; the lost claim counted no delivery), its lease record gone.
--         A job's first write is one a full Redis refuses (ZADD): refused, the
--         job is left as it was (a script is not rolled back). An expired job leaves
--         the queue. A record's concurrency
--         slot is released with it.
-- @include wake
-- @include conc

local me, progress_prefix, queue = ARGV[1], ARGV[2], ARGV[3]
local settled = tonumber(ARGV[4])
local running = {}
for i = 5, #ARGV do running[ARGV[i]] = true end
local given = 0
local held = redis.call('HGETALL', KEYS[1])
for i = 1, #held, 2 do
  local id = held[i]
  local ok, rec = pcall(cjson.decode, held[i + 1])
  if ok and type(rec) == 'table' and rec.q == queue and not running[id]
      and tonumber(rec.c or 0) <= settled then
    local progress = progress_prefix .. id
    local holder = redis.call('GET', progress)
    if holder == me or not holder then
      local queued = redis.call('ZSCORE', rec.q, id)
      if queued then queued = fair_put_back(rec.q, id, rec.s) end
      redis.call('DEL', progress)
      if queued then wake(rec.w) end
      given = given + 1
    end
    redis.call('HDEL', KEYS[1], id)
    conc_release(held[i + 1])
  end
end
return given
