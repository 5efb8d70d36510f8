-- Shared by every run transition. KEYS[1] is the run's meta hash, KEYS[2] its
-- message list, KEYS[3] its event stream; the other keys of the run derive from
-- KEYS[1]. ARGV[1] is a JSON object of arguments built by orchestrator/store.py.
-- Each script runs atomically: a transition either happens whole or not at all.
local meta, msgs, events = KEYS[1], KEYS[2], KEYS[3]
local A = cjson.decode(ARGV[1])

local function step_key(n)
  return meta .. ':s:' .. n
end

local function is_terminal(status)
  return status == 'succeeded' or status == 'failed' or status == 'cancelled'
end

-- The event's sequence number is its stream id, so readers resume without gaps.
local function emit(ev)
  local seq = redis.call('HINCRBY', meta, 'seq', 1)
  redis.call('XADD', events, '0-' .. seq, 'e', ev)
  return seq
end

local function emit_all(list)
  if list then
    for _, ev in ipairs(list) do emit(ev) end
  end
end

-- Enqueue in arq's own layout (job key + queue zset), then wake a sleeping worker.
local function enqueue(job)
  local job_key = 'arq:job:' .. job.job_id
  if redis.call('EXISTS', job_key) == 1 then return 0 end
  redis.call('PSETEX', job_key, job.expires_ms, job.payload)
  redis.call('ZADD', job.queue_key, job.score_ms, job.job_id)
  redis.call('LPUSH', job.wake_key, '1')
  redis.call('LTRIM', job.wake_key, 0, 63)
  return 1
end

local function usage_totals()
  local u = redis.call('HMGET', meta, 'u_in', 'u_out', 'u_total', 'u_cached', 'u_reason')
  return {
    input_tokens = tonumber(u[1]) or 0,
    output_tokens = tonumber(u[2]) or 0,
    total_tokens = tonumber(u[3]) or 0,
    cached_input_tokens = tonumber(u[4]) or 0,
    reasoning_tokens = tonumber(u[5]) or 0,
  }
end

local function expire_run()
  local ttl = A.retention_s
  local last = tonumber(redis.call('HGET', meta, 'step')) or 0
  redis.call('EXPIRE', meta, ttl)
  redis.call('EXPIRE', meta .. ':tools', ttl)
  redis.call('EXPIRE', msgs, ttl)
  redis.call('EXPIRE', events, ttl)
  for i = 0, last do redis.call('EXPIRE', step_key(i), ttl) end
end

local function finish_run(status, ev_type, fields)
  redis.call('HSET', meta, 'status', status, 'finished_at', A.at)
  local ev = {type = ev_type, run_id = A.run_id, at = A.at, status = status,
              usage = usage_totals()}
  for k, v in pairs(fields) do ev[k] = v end
  emit(cjson.encode(ev))
  expire_run()
  -- Workers keeping something for the run (sandbox sessions) let it go now.
  redis.call('PUBLISH', 'aq:run-ended', A.run_id)
end

local function succeed(step)
  local text = redis.call('HGET', step, 'text') or ''
  local reason = redis.call('HGET', step, 'finish_reason') or 'stop'
  redis.call('HSET', meta, 'text', text)
  finish_run('succeeded', 'finish', {text = text, finish_reason = reason})
  return 'finished'
end

-- All results of step n are in: append them as one tool message in call order,
-- then either schedule step n+1 or finish, as decided when the step was planned.
local function join(n)
  local step = step_key(n)
  local order = cjson.decode(redis.call('HGET', step, 'order'))
  local parts = {}
  for i, id in ipairs(order) do
    parts[i] = redis.call('HGET', step, 'r:' .. id)
  end
  if #parts > 0 then
    redis.call('RPUSH', msgs, '{"role":"tool","content":[' .. table.concat(parts, ',') .. ']}')
  end
  if redis.call('HGET', step, 'after') == 'continue' then
    redis.call('HSET', meta, 'step', n + 1, 'status', 'running')
    enqueue(A.next_job)
    return 'continued'
  end
  return succeed(step)
end

-- Write a call's result once; the completion that brings the count to zero joins.
local function record(n, id)
  local step = step_key(n)
  if redis.call('HSETNX', step, 'r:' .. id, A.result) == 0 then return 'duplicate' end
  redis.call('HSET', step, 'st:' .. id, 'done')
  emit_all(A.events)
  if redis.call('HINCRBY', step, 'pending', -1) > 0 then return 'recorded' end
  return join(n)
end

local function unpark(n)
  if redis.call('HINCRBY', step_key(n), 'parked', -1) <= 0
     and redis.call('HGET', meta, 'status') == 'awaiting' then
    redis.call('HSET', meta, 'status', 'running')
  end
end

-- Guards shared by the call transitions: the run is live, the step is current.
local function call_guard()
  local status = redis.call('HGET', meta, 'status')
  if not status then return 'unknown-run' end
  if is_terminal(status) then return 'closed' end
  if tonumber(redis.call('HGET', meta, 'step')) ~= A.step then return 'stale' end
  return nil
end
