-- take: a worker's whole per-job bookkeeping in one round trip (workers/queue/claims.py):
--   end the job it just ran, then claim up to its free slots.
-- KEYS    queue, wake-up list, worker's jobs hash, holders set, abort set, the queue's
--         timer set, the worker's tool set, the jobs its last claim passed over (one
--         partition's: one slot); [9] optional: the ended job's queue, when a done end
--         rides with a claim on another queue (arq_worker._ride: the claim handed to a
--         claim loop of the same worker waiting on that queue; absent: KEYS[1]).
-- ARGV    [1] '1' when the worker's lease is held (else it claims nothing), [2] worker id,
--         [3] how many to claim, [4] in-progress backstop ms, [5] in-progress prefix,
--         [6] job prefix, [7] retry prefix (a job's deliveries that died), [8] lease
--         record prefix, [9] ended job id ('' for none), [10] 'done' | 'release', [11]
--         defer ms (a release due that much later), [12] '1' when the call rides behind
--         the job's last transition (as claims.TAKE_RIDING), [13] how many ready jobs it may pass over (jobs
--         needing a tool its set lacks), [14] how long the passed-over set is kept (s),
--         [15] '1' when the claim looks at the timer set first (the worker's clock says
--         a look is due: claims.TIMER_LOOK_S), [16] '1' when the ended job's lease names
--         no concurrency key (its claim said so): a done job's record then needs no read,
--         [17] the worker's tool set, each name between newlines, when it is small
--         ('' : the set key says), [18] the lane the worker's last call found to be the
--         queue's only one ('' for none: the reply's), [19] '1' when the call rides
--         behind a BLPOP of a wake-up token (absent: alone).
-- Replies {more, next timer, only lane, id, score, payload, deliveries, keyed, id, ...};
--         more = 1 when ready jobs were left behind for want of slots; next timer = in
--         how many ms a timer this call saw or set falls due (-1: none seen); only lane =
--         the lane key for the next call's ARGV[18]; keyed = 1 when the job's lease names
--         a concurrency key.
-- Effects the jobs it claims: round-robin over the queue's tenants with ready work,
--         within a tenant over its keys (lanes), each weighted, within a lane by rank
--         (core/fairness.py); a lane it empties leaves its tenant's ring, a tenant
--         without a lane left the ring of tenants, but the queue's only lane stays
--         listed (kept: its mark and rings stay) until a claim finds it still empty,
--         which drops it and looks at the timers; a job whose payload
--         `needs` what the tool set lacks is left ready, untouched;
--         the ended job: done (arq's cleanup; an abort mark left for it goes with the
--         abort set's pruning) or released (back into its lane at the time
--         it was due, or a timer when deferred); each claimed job: its in-progress key,
--         score +inf, a lease record (its delivery is counted only if it dies: the
--         reaper counts it, reap_partition.lua), the worker listed among the holders
--         (with its mark in its jobs hash, unless the mark says it is); the wake-up
--         list kept a hint of ready work (a token passed on when the claim newly
--         passed over jobs for others: the one it popped may have been theirs); timers
--         fallen due (up to a bound per call) moved into their lanes first, at the time
--         they fell due, when the call looks at them or finds no ready work.
--         Concurrency keys (orchestrator/concurrency/): a job of a run with a key is
--         taken only while its run holds a slot or the key has one free (counted in the
--         key's counter, named in the lease record); else it leaves its lane for the
--         key's held jobs, costing a look, and the walk goes on. An ended job's record
--         lowers its run's count; a slot freed puts held jobs back.
-- @include clock
-- @include wake
-- @include fair
-- @include conc
-- @include job_done

-- Redis's clock, not the caller's: a claim sent behind a BLPOP runs when a token comes.
-- Read once, and only by a call that needs it (a release, a timer to compare).
local clock = nil
local function now()
  if not clock then clock = now_ms() end
  return clock
end
local me, n = ARGV[2], tonumber(ARGV[3])
local queue, wake_list, jobs, holders, aborts = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local progress_prefix, job_prefix, retry_prefix = ARGV[5], ARGV[6], ARGV[7]

local ended = ARGV[9]
local ended_queue = KEYS[9] or queue  -- (a done end only: a release goes back into KEYS[1])
-- The worker is in the holders set (what a reaper looks at) while its jobs hash holds
-- its mark (LEASE.LISTED): both are written together and a reaper removes both (it
-- deletes the hash), so a claim learns whether to list the worker from the count of
-- new fields in the write that records its first job's lease, with no command of its own.
local listed = false  -- known listed in this call
local function lease(id, record)
  if listed then
    redis.call('HSET', jobs, id, record)
  elseif redis.call('HSET', jobs, id, record, LEASE.LISTED, '1') ~= 1 then
    -- 2: the mark was new (a first claim, or the reaper took the worker's jobs since);
    -- 0: the job's own record was there already, so the count says nothing of the mark.
    redis.call('SADD', holders, me)
  end
  listed = true
end
local out = {0, -1, ARGV[18]}
-- A timer this call saw or set: the worker looks at the timer set again by then.
local function note_timer(ms)
  if out[2] < 0 or ms < out[2] then out[2] = ms end
end
if ended ~= '' then
  -- Behind the job's last transition (ARGV[12]) the call is claims.TAKE_RIDING, this
  -- script under Lua's shebang, which a full Redis refuses whole as it refused the
  -- transition: nothing is ended then, and no denied write is needed to say so.
  local progress = progress_prefix .. ended
  -- Its lease record still here means nobody took the job from this worker (a reaper
  -- or a give-back deletes the record first; a job held is +inf, which no other claim
  -- takes): the in-progress key, if any, is ours, and needs no read.
  -- A done job whose lease names no concurrency key needs nothing of its record but
  -- whether it is here: the HDEL says so.
  local record, held = false, false
  if ARGV[16] == '1' and ARGV[10] == 'done' then
    held = redis.call('HDEL', jobs, ended) == 1
  else
    record = redis.call('HGET', jobs, ended)
    held = record ~= false
    if held then redis.call('HDEL', jobs, ended) end
  end
  local ours = held or redis.call('GET', progress) == me
  -- The record goes once (a reaper that took it first released the slot itself).
  if record then conc_release(record) end
  if ARGV[10] == 'done' then
    job_done(ended_queue, ended, ours, progress_prefix, retry_prefix, job_prefix)
  elseif ours then  -- a release: its delivery was never counted (only a death counts)
    redis.call('DEL', progress)
    if redis.call('ZSCORE', queue, ended) then
      local defer = tonumber(ARGV[11])
      if defer > 0 then  -- a timer until then: the queue holds ready and running work
        redis.call('ZREM', queue, ended)
        redis.call('ZADD', KEYS[6], now() + defer, ended)
        note_timer(defer)
      else  -- back in its lane at the time it was due
        local due = now()
        if record then
          local ok, rec = pcall(cjson.decode, record)
          if ok and type(rec) == 'table' and rec.s then due = rec.s end
        end
        if fair_put_back(queue, ended, due) then wake(wake_list) end
      end
    end
  end
end

if n <= 0 or ARGV[1] ~= '1' then return out end
-- Timers fallen due join their lanes (their score is when they fell due, so they queue
-- behind older work). Bounded per call: a backlog of timers moves over a few claims.
-- The earliest timer is read first, so a look with no timer reads no clock and one whose
-- earliest timer is not yet due reads no more (and says when it is). Every other way
-- back into the ready range (a release, a reaper, a give-back, a held job's slot freed)
-- goes into the lane itself (fair.lua: fair_put_back), so the queue holds no ready job
-- outside a lane. How many moved.
local function fall_due()
  local timers = KEYS[6]
  local earliest = redis.call('ZRANGE', timers, 0, 0, 'WITHSCORES')
  if #earliest == 0 then return 0 end
  if tonumber(earliest[2]) > now() then
    note_timer(tonumber(earliest[2]) - now())
    return 0
  end
  local fallen = redis.call('ZRANGEBYSCORE', timers, '-inf', now(), 'WITHSCORES', 'LIMIT', 0, 64)
  for i = 1, #fallen, 2 do
    if not fair_put_back(queue, fallen[i], tonumber(fallen[i + 1])) then
      redis.call('DEL', retry_prefix .. fallen[i])
    end
    redis.call('ZREM', timers, fallen[i])
  end
  if #fallen == 128 then note_timer(0) end  -- the bound: more may be due already
  return #fallen / 2
end
-- The timers are looked at when the worker's clock says a look is due, and by a claim
-- that finds no ready work (an idle worker's fallback poll among them): a busy worker
-- reads no timer set per job.
local looked = ARGV[15] == '1'
if looked then fall_due() end
local tool_set = KEYS[7]
local fk = fair_keys(queue)

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

-- Whether this worker serves what a job needs: its tool set, in the call when small
-- (each name between newlines), else its set key.
local function serves(needs)
  if ARGV[17] ~= '' then return string.find(ARGV[17], '\n' .. needs .. '\n', 1, true) ~= nil end
  return redis.call('SISMEMBER', tool_set, needs) == 1
end

-- A held job put back by a look (a free slot beside held work) may have joined the lane
-- looked at, or the rings behind the cursors, which then no longer know their ends.
local put_back = false

-- A lane's head job: 'gone' (no longer ready in the queue: claimed, ended, cancelled,
-- expired), 'held' (its key is at its max: moved to the key's held jobs), 'pass' (for a
-- tool this worker lacks) or 'take', out of the ready range already, with its payload,
-- when it was due, what its lease record adds (its key's counter and run) and its run's
-- key and tenant weights (one read of the run's meta gives both its key and weights).
-- A lane lists a job at its due time less its run's rank (fair.lua: fair_index), so
-- its due time is the lane's score plus that rank, with no read of the queue.
local function look(id, lane_score)
  local got = redis.call('MGET', job_prefix .. id, retry_prefix .. id)
  local payload = got[1]
  if not payload then  -- expired before anyone ran it, or ended
    redis.call('ZREM', queue, id)
    redis.call('DEL', retry_prefix .. id)
    return 'gone'
  end
  local needs = needs_of(payload)
  if needs ~= '' and not serves(needs) then
    local score = tonumber(redis.call('ZSCORE', queue, id) or '0')
    if score >= 0 then return 'gone' end
    return 'pass'
  end
  -- Out of the ready range, in the one write that says whether it was in it: a job in a
  -- lane is in the queue at its indexed score (below zero) until a claim takes it
  -- (+inf); absent or +inf, it is gone. Every verdict but 'take' from here on puts it
  -- back or lets it go.
  if redis.call('ZADD', queue, 'XX', 'GT', 'CH', '+inf', id) == 0 then return 'gone' end
  -- Its in-progress key, taken here once (NX: the same write says whether another
  -- holds it already: a remote lease took it from the queue, leaving its lane entry).
  local progress = progress_prefix .. id
  if not redis.call('SET', progress, me, 'PX', ARGV[4], 'NX') then return 'gone' end
  local run = string.match(payload, '"run_id":%s*"([^"]+)"')
  local meta_key = run and fair_run_meta(queue, run)
  local meta = run and redis.call('HMGET', meta_key, CONC.COUNTER_FIELD, CONC.MAX_FIELD,
                                  FAIR.WEIGHT_FIELD, FAIR.TENANT_WEIGHT_FIELD, RUNS.STATUS,
                                  FAIR.TENANT_FIELD, FAIR.RANK_FIELD)
  -- Abort marks are written with the run's end (runs/lua/cancel.lua): a run that has not
  -- ended has none, and its job needs no look in the abort set.
  local live = meta and meta[5]
    and not string.find(RUNS.ENDED, '|' .. meta[5] .. '|', 1, true)
  if not live and redis.call('ZREM', aborts, id) == 1 then
    -- its run was cancelled before it started: it never runs
    redis.call('ZREM', queue, id)
    redis.call('DEL', job_prefix .. id, retry_prefix .. id, progress)
    return 'gone'
  end
  -- (fair.lua's fair_lane_of: a run's rank counts when its meta names its tenant)
  local rank = meta and meta[6] and tonumber(meta[7]) or 0
  local due = tonumber(lane_score) + rank
  local due_text = string.format('%.17g', due)
  -- Deliveries: this one, and those that died before it (a reaper counted each).
  local tries = tonumber(got[2] or '0') + 1
  if not run then return 'take', payload, due_text, '', 1, 1, tries end
  local counter, max = meta[1], tonumber(meta[2])
  local weight, tenant_weight = tonumber(meta[3]) or 1, tonumber(meta[4]) or 1
  if not counter then return 'take', payload, due_text, '', weight, tenant_weight, tries end
  if not conc_admit(counter, max, run) then  -- held apart: not ready in the queue's depth
    redis.call('DEL', progress)
    redis.call('ZADD', queue, due - FAIR.OFFSET, id)  -- its ready score, as it was
    conc_hold(counter, queue, id, due_text, meta_key)
    return 'held'
  end
  -- Room left (a slot freed while its jobs were put back, and one of them was gone):
  -- the next held job comes back too, so a free slot never sits beside held work.
  if redis.call('HLEN', counter) < max then
    conc_put_back(counter, 1)
    put_back = true
  end
  local extra = ',"k":' .. cjson.encode(counter) .. ',"r":' .. cjson.encode(run)
  return 'take', payload, due_text, extra, weight, tenant_weight, tries
end

-- The walk's place: a position in a ring (list) read two entries at a time, so the claim
-- knows without another read whether anything follows the entry it looks at.
local function cursor(list)
  return {list = list, pos = 0}
end

local function read(c)
  if c.entry == nil then
    local got = redis.call('LRANGE', c.list, c.pos, c.pos + 1)
    c.entry, c.more = got[1] or false, got[2] ~= nil
  end
  return c.entry
end

local function advance(c)
  c.pos, c.entry = c.pos + 1, nil
end

-- The entry at the cursor leaves its ring (its lane or tenant has no ready job left).
-- Off the head it is looked for from the head, at most as far as the walk went; the
-- head alone leaves the ring empty, which needs no second look.
local function remove(c)
  if c.pos == 0 then redis.call('LPOP', c.list) else redis.call('LREM', c.list, 1, c.entry) end
  if c.pos == 0 and not c.more then c.entry = false else c.entry = nil end
end

-- The head of a ring has taken a job: its turn is `weight` jobs, the deficit carried in
-- its entry between claims; a head whose turn is over goes to the tail (unless alone).
local function charge(c, weight)
  local left, name = fair_parse(c.entry)
  local was = left
  if left < 1 then left = left + weight end
  left = left - 1
  if left >= 1 then
    if left ~= was then
      c.entry = fair_entry(left, name)
      redis.call('LSET', c.list, 0, c.entry)
    end
    return
  end
  if was ~= 0 then redis.call('LSET', c.list, 0, fair_entry(0, name)) end
  if c.more then
    redis.call('LMOVE', c.list, c.list, 'LEFT', 'RIGHT')
    c.entry = nil
  else
    c.entry = fair_entry(0, name)
  end
end

-- Walks the tenants' ring from its head, each tenant's keys from theirs, each lane's jobs
-- by rank: the head lane's jobs first, then, when this worker can take none of them
-- (they need tools it lacks), the next lane's, and so on; a ring turns only when its
-- head takes a job. At most n + lookahead jobs and lanes are looked at, one at a time,
-- so its cost grows with neither the number of lanes nor tenants nor tools nor workers.
local budget = n + tonumber(ARGV[13])
local claimed = 0
local left = {}  -- the jobs passed over, for workers that serve them
local tenants = cursor(fk.ring)
local tenant, lanes, skip = nil, nil, 0  -- the tenant looked at, its keys' cursor, jobs passed
local walked = false  -- the ring listed anything when the claim began
local cleared = false  -- the walk left no ready work listed and dropped the tokens

-- Whether the lane at the cursors is the queue's only one listed (its tenant's only key,
-- the only tenant) and the walk passed nothing over: its rings then go, or stay, whole.
local function only_lane()
  return lanes.pos == 0 and not lanes.more and tenants.pos == 0 and not tenants.more
    and #left == 0
end

-- The queue's only lane leaves with both rings, and the tokens left with them (nothing
-- is ready any more, and nothing was passed over), in one write.
local function clear(lane_key)
  redis.call('DEL', lane_key, lanes.list, tenants.list, wake_list)
  tenants.entry, cleared, tenant = false, true, nil
end

-- The lane looked at: how many marks precede its jobs (1: the only lane's mark, fair.lua),
-- as its read from its head found; and the head the claim read already (its only lane's).
local lane_off, read_ahead = 0, nil

-- Whether a lane's first member is the only lane's mark: its tenant and key, else nil.
local function only_names(first)
  if not first or string.sub(first, 1, #FAIR.ONLY) ~= FAIR.ONLY then return nil end
  local ok, names = pcall(cjson.decode, string.sub(first, #FAIR.ONLY + 1))
  if ok and type(names) == 'table' and type(names[1]) == 'string'
      and type(names[2]) == 'string' then
    return names
  end
  return nil
end

-- A lane's head read with its marks: the members after the only lane's mark, if any.
local function past_only(lane_key, head)
  lane_off = 0
  if not only_names(head[1]) then return head end
  lane_off = 1
  out[3] = lane_key
  local rest = {}
  for i = 3, #head do rest[#rest + 1] = head[i] end
  return rest
end

-- Up to two members of a lane from the walk's place in it (`skip` jobs passed over), as
-- a lane without the only lane's mark holds them. A read from its head takes one more:
-- the mark, if there, comes first, and says the lane is the queue's only one.
local function lane_head(lane_key)
  if skip > 0 then
    return redis.call('ZRANGE', lane_key, skip + lane_off, skip + lane_off + 1, 'WITHSCORES')
  end
  if read_ahead and read_ahead.key == lane_key then
    local head = read_ahead.head
    read_ahead = nil
    return head
  end
  return past_only(lane_key, redis.call('ZRANGE', lane_key, 0, 2, 'WITHSCORES'))
end

-- The lane the worker's last call found to be the queue's only one: read first, and when
-- its mark says it still is, the walk starts there without reading the rings (each holds
-- that lane's one entry: its turn's deficit only matters beside another, see charge).
local function start_at_only_lane(hint)
  if hint == '' or string.sub(hint, 1, #fk.lane) ~= fk.lane then return end
  local head = redis.call('ZRANGE', hint, 0, 2, 'WITHSCORES')
  local names = only_names(head[1])
  if not names or fair_lane_key(fk, names[1], names[2]) ~= hint then
    out[3] = ''  -- no longer the only lane: the rings say where to go
    return
  end
  tenants.entry, tenants.more = fair_entry(0, names[1]), false
  tenant, lanes, skip = names[1], cursor(fk.keys .. names[1]), 0
  lanes.entry, lanes.more = fair_entry(0, names[2]), false
  read_ahead = {key = hint, head = past_only(hint, head)}
end

start_at_only_lane(ARGV[18])
if not looked and not read(tenants) and fall_due() > 0 then tenants = cursor(fk.ring) end

local function walk()
  while claimed < n and budget > 0 do
    local t_entry = read(tenants)
    if not t_entry then break end
    walked = true
    local _, name = fair_parse(t_entry)
    if name ~= tenant then
      tenant, lanes, skip = name, cursor(fk.keys .. name), 0
    end
    local k_entry = read(lanes)
    if not k_entry then
      if lanes.pos == 0 then  -- listed with no key (never by the enqueue): it leaves
        remove(tenants)
      else  -- nothing here for this worker: the next tenant
        advance(tenants)
        budget = budget - 1
      end
      tenant = nil
    else
      local _, key = fair_parse(k_entry)
      local lane_key = fair_lane_key(fk, name, key)
      local head = lane_head(lane_key)
      if #head == 0 or head[1] == FAIR.LISTED then  -- no job at this place in the lane
        if skip > 0 then  -- nothing here for this worker: the next lane
          advance(lanes)
          skip = 0
          budget = budget - 1
        elseif only_lane() then  -- the kept lane (fair.lua), still empty: it goes
          clear(lane_key)
        else  -- listed while empty (a kept lane others joined since): it leaves
          if #head > 0 then redis.call('DEL', lane_key) end
          remove(lanes)
        end
      else
        local id = head[1]
        local verdict, payload, due, lease_extra, weight, tenant_weight, tries = look(id, head[2])
        local grew = put_back
        if grew then  -- the lane and the rings are asked again, not assumed
          put_back, tenants.more, lanes.more = false, true, true
        end
        -- A job gone leaves its lane for good: it costs once, not from the budget.
        if verdict ~= 'gone' then budget = budget - 1 end
        if verdict == 'pass' then
          skip = skip + 1
          left[#left + 1] = id
        else
          -- The lane's last job: only its mark follows it (or nothing, in a lane listed
          -- before lanes had marks). A lane that held this job alone goes (or stays) whole
          -- below, with the rings when it was the last (a lone run's job: the common
          -- one-job lane).
          local marked = head[3] == FAIR.LISTED
          local last = skip == 0 and (#head == 2 or marked)
          local alone = last and not grew
          if not alone then redis.call('ZREM', lane_key, id) end
          local drained = alone
            or (last and redis.call('ZCARD', lane_key) == (marked and 1 or 0) + lane_off)
          if verdict == 'take' then
            lease(id, ARGV[8] .. due .. lease_extra .. '}')
            claimed = claimed + 1
            out[#out + 1] = id
            out[#out + 1] = due
            out[#out + 1] = payload
            out[#out + 1] = tries
            out[#out + 1] = lease_extra == '' and 0 or 1
            if lanes.pos == 0 and not drained then
              charge(lanes, weight)
              if lanes.entry == nil then skip = 0 end  -- its turn is over: the next lane
            end
          end
          local emptied = false  -- the tenant's last lane with work
          if drained then
            emptied = lanes.pos == 0 and not lanes.more
            skip = 0
          end
          if drained and only_lane() then
            if alone and marked then
              -- The queue's only lane stays listed with its mark, and the rings with it
              -- (a kept lane): the next enqueue into it writes only the lane. Nothing is
              -- ready any more: the tokens go, unless the claim popped one and took one
              -- job (the enqueue pushed one token for it: the list holds none for work
              -- taken). A token left over all the same wakes one claim, which finds the
              -- lane empty and drops it with the tokens.
              redis.call('ZREM', lane_key, id)
              if ARGV[19] ~= '1' or claimed ~= 1 then redis.call('DEL', wake_list) end
              tenants.entry, cleared, tenant = false, true, nil
            else
              clear(lane_key)
            end
          else
            if drained then
              if alone or marked then redis.call('DEL', lane_key) end
              remove(lanes)
            end
            if emptied then
              remove(tenants)
              tenant = nil
            elseif verdict == 'take' and tenants.pos == 0 then
              charge(tenants, tenant_weight)
              if tenants.entry == nil then tenant = nil end  -- its turn is over
            end
          end
        end
      end
    end
  end
end
walk()
-- A walk that found no ready work (a kept lane empty) looks at the timers as a claim
-- finding the ring empty does, and walks again when some fell due.
if claimed == 0 and cleared and not looked then
  looked = true
  if fall_due() > 0 then
    tenants, tenant, cleared = cursor(fk.ring), nil, false
    walk()
  end
end
-- Ready work left for want of slots? A ring lists only what has ready jobs.
local more = claimed >= n and not cleared and redis.call('EXISTS', fk.ring) == 1
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
elseif #left == 0 and walked and not cleared then
  -- The ring is empty now: the tokens left are for work this walk took or dropped. A
  -- claim that found it empty already drops nothing: the claim that emptied it did.
  redis.call('DEL', wake_list)
end
return out
