-- take: a worker's whole per-job bookkeeping in one round trip (workers/queue/claims.py):
--   end the job it just ran, then claim up to its free slots.
-- KEYS    queue, wake-up list, worker's jobs hash, holders set, abort set, the queue's
--         timer set, the worker's tool set, the jobs its last claim passed over (one
--         partition's: one slot).
-- ARGV    [1] '1' when the worker's lease is held (else it claims nothing), [2] worker id,
--         [3] how many to claim, [4] in-progress backstop ms, [5] in-progress prefix,
--         [6] job prefix, [7] retry prefix, [8] lease record prefix, [9] ended job id
--         ('' for none), [10] 'done' | 'release', [11] defer ms (a release due that
--         much later), [12] '1' when the call rides behind the job's last transition,
--         [13] how many ready jobs it may pass over (jobs needing a tool its set lacks),
--         [14] how long the passed-over set is kept (s); the rest (take.lua's) unread.
-- Replies {more, -1, '', id, score, payload, deliveries, 1, id, ...} (take.lua's layout);
--         more = 1 when ready jobs were left behind for want of slots.
-- Effects a job whose payload `needs` what the tool set lacks is left ready, untouched;
--         the ended job: done (arq's cleanup) or released (back into the ready range at
--         its score, or deferred); each claimed job: its in-progress key, score +inf, a
--         lease record (a death counts its delivery); the wake-up
--         list kept a hint of ready work (a token passed on when the claim newly
--         passed over jobs for others: the one it popped may have been theirs); timers fallen due (up to a bound per call)
--         moved into the queue first, at the time they fell due.
-- @include clock
-- @include wake

-- Redis's clock, not the caller's: a claim sent behind a BLPOP runs when a token comes.
local now = now_ms()
local me, n = ARGV[2], tonumber(ARGV[3])
local queue, wake_list, jobs, holders, aborts = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local progress_prefix, job_prefix, retry_prefix = ARGV[5], ARGV[6], ARGV[7]

local ended = ARGV[9]
if ended ~= '' then
  if ARGV[12] == '1' then
    -- Behind the job's last transition: a denied write first (a no-op, the worker is in
    -- the set), so that a full Redis, which refused the transition, refuses this too
    -- before it ends anything.
    redis.call('SADD', holders, me)
  end
  local progress = progress_prefix .. ended
  local holder = redis.call('GET', progress)
  local record = redis.call('HGET', jobs, ended)
  local ours = holder == me or (not holder and record ~= false)
  redis.call('HDEL', jobs, ended)
  if ARGV[10] == 'done' then
    if ours then redis.call('DEL', progress) end
    redis.call('DEL', retry_prefix .. ended, job_prefix .. ended)
    redis.call('ZREM', queue, ended)
    redis.call('ZREM', aborts, ended)
  elseif ours then
    redis.call('DEL', progress)
    if redis.call('ZSCORE', queue, ended) then
      local defer = tonumber(ARGV[11])
      local due = now + defer
      if defer <= 0 and record then
        local ok, rec = pcall(cjson.decode, record)
        if ok and type(rec) == 'table' and rec.s then due = rec.s end
      end
      redis.call('ZADD', queue, due, ended)
      if defer <= 0 then wake(wake_list) end
    end
  end
end

local out = {0, -1, ''}  -- (no only lane known: take.lua's third)
if n <= 0 or ARGV[1] ~= '1' then return out end
-- Timers fallen due join the ready range (their score is when they fell due, so they
-- queue behind older work). Bounded per call: a backlog of timers moves over a few
-- claims, and the read costs nothing while none is due.
local timers = KEYS[6]
local fallen = redis.call('ZRANGEBYSCORE', timers, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 64)
for i = 1, #fallen, 2 do
  redis.call('ZADD', queue, fallen[i + 1], fallen[i])
  redis.call('ZREM', timers, fallen[i])
end
local tool_set = KEYS[7]

-- What a job needs a worker to serve ('' for any worker of its queue): its envelope's
-- `needs` (orchestrator/core/envelopes.py), read from the payload the claim fetches.
local function needs_of(payload)
  if string.find(payload, '"needs":""', 1, true) then return '' end
  local ok, job = pcall(cjson.decode, payload)
  if ok and type(job) == 'table' and type(job.a) == 'table' and type(job.a[1]) == 'table'
      and type(job.a[1].needs) == 'string' then
    return job.a[1].needs
  end
  return ''
end

-- Pages through the ready range: a job claimed or dropped leaves it, one passed over
-- stays, so the next page starts past those passed over. At most n + lookahead jobs
-- are looked at, however many for other tools wait at its head.
local budget = n + tonumber(ARGV[13])
local claimed, passed, more = 0, 0, false
local left = {}  -- the jobs passed over, for workers that serve them
while claimed < n and budget > 0 do
  local want = math.min(n - claimed + 1, budget)
  local due = redis.call('ZRANGEBYSCORE', queue, '-inf', now, 'WITHSCORES', 'LIMIT', passed, want)
  budget = budget - #due / 2
  for i = 1, #due, 2 do
    local id, score = due[i], due[i + 1]
    if claimed >= n then
      more = true
    else
      local progress = progress_prefix .. id
      if redis.call('EXISTS', progress) == 1 then
        redis.call('ZADD', queue, '+inf', id)  -- held already: out of the ready range
      elseif redis.call('ZREM', aborts, id) == 1 then
        -- its run was cancelled before it started: it never runs
        redis.call('ZREM', queue, id)
        redis.call('DEL', job_prefix .. id, retry_prefix .. id)
      else
        local payload = redis.call('GET', job_prefix .. id)
        if not payload then  -- expired before anyone ran it
          redis.call('ZREM', queue, id)
          redis.call('DEL', retry_prefix .. id)
        else
          local needs = needs_of(payload)
          if needs ~= '' and redis.call('SISMEMBER', tool_set, needs) == 0 then
            passed = passed + 1  -- for workers that serve it
            left[#left + 1] = id
          else
            redis.call('SET', progress, me, 'PX', ARGV[4])
            redis.call('ZADD', queue, '+inf', id)
            redis.call('HSET', jobs, id, ARGV[8] .. score .. '}')
            -- deliveries: this one and those that died (the reaper counts a death)
            local tries = tonumber(redis.call('GET', retry_prefix .. id) or '0') + 1
            claimed = claimed + 1
            out[#out + 1] = id
            out[#out + 1] = score
            out[#out + 1] = payload
            out[#out + 1] = tries
            out[#out + 1] = 1  -- its lease record is read at its end
          end
        end
      end
    end
  end
  if #due / 2 < want then break end  -- the ready range is exhausted
end
if claimed >= n and not more then  -- the last page ended on a job it took
  more = #redis.call('ZRANGEBYSCORE', queue, '-inf', now, 'LIMIT', passed, 1) > 0
end
if claimed > 0 then redis.call('SADD', holders, me) end
-- The token this claim popped may have been for a job it left: pass it on (Redis hands
-- it to the worker asleep longest) when it left a job it had not left before. The same
-- jobs left again wake nobody, so a worker alone awake never spins on its own token.
local woken = more
if #left > 0 then
  local passed_key = KEYS[8]
  for _, id in ipairs(left) do
    if not woken and redis.call('SISMEMBER', passed_key, id) == 0 then woken = true end
  end
  redis.call('DEL', passed_key)
  redis.call('SADD', passed_key, unpack(left))
  redis.call('EXPIRE', passed_key, ARGV[14])
end
if more then out[1] = 1 end
if woken then
  if redis.call('LLEN', wake_list) == 0 then redis.call('LPUSH', wake_list, '1') end
elseif #left == 0 then
  redis.call('DEL', wake_list)
end
return out
