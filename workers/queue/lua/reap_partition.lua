-- reap_partition: one partition of a worker whose lease lapsed (its liveness key was found
--   gone). Every key is in the partition's slot (a lease record names its partition's
--   queue and wake-up list).
-- KEYS    [1] the partition's holders set, [2] the worker's jobs hash there.
-- ARGV    [1] the worker id, [2] arq's in-progress key prefix, [3] arq's delivery
--         counter prefix, [4] how long a counter is kept (s).
-- Replies how many jobs it re-delivered.
-- Effects its jobs re-delivered (their in-progress keys go, only those it still holds,
--         each back at the score it had, their queues woken), each delivery that died
--         counted (a worker's claim counts none itself; a remote lease's holder counted
--         its own: its record says `d`); it leaves the holders; every record's
--         concurrency slot released (the records all go, and its mark with them:
--         its next claim lists it again, take.lua).
-- @include wake
-- @include conc

local id = ARGV[1]
local reaped = 0
local jobs = redis.call('HGETALL', KEYS[2])
for i = 1, #jobs, 2 do
  if jobs[i] ~= LEASE.LISTED then  -- its mark (take.lua) is no job
    local progress = ARGV[2] .. jobs[i]
    local holder = redis.call('GET', progress)
    if holder == id or not holder then
      redis.call('DEL', progress)
      -- Its lease record (workers/queue/claims.py): the job goes back into its lane at
      -- the time it was due, and the queue is woken (an expired job leaves the queue).
      local rec = cjson.decode(jobs[i + 1])
      if redis.call('ZSCORE', rec.q, jobs[i]) and fair_put_back(rec.q, jobs[i], rec.s) then
        wake(rec.w)
        if not rec.d then
          redis.call('INCR', ARGV[3] .. jobs[i])
          redis.call('EXPIRE', ARGV[3] .. jobs[i], ARGV[4])
        end
      end
      reaped = reaped + 1
    end
    conc_release(jobs[i + 1])
  end
end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[1], id)
return reaped
