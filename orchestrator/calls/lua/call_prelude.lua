-- call_prelude: shared by every transition of a tool call without a run
-- (orchestrator/calls/state.py); the generated constants chunk comes first.
--
-- KEYS[1] the call's hash, KEYS[2] its event stream; both carry the call id's hash tag.
-- ARGV[1] the transition's input model as JSON: `A`. Read here: A.call_id, A.at,
--   A.retention_s (CallTransitionInput's own fields; retention_s the store adds).
-- Every script returns reply(...): one JSON object, {outcome = OUT.*, ...}, and checks
-- before it writes, so a refused transition writes nothing. reply, emit and enqueue are
-- the includes every machine shares (orchestrator/machine/lua/).
local call, events = KEYS[1], KEYS[2]
local A = cjson.decode(ARGV[1])

-- @include reply
-- @include emit
-- @include enqueue
-- @include clock
-- @include moving

-- The call moved (created, claimed): the sweeper (calls/redrive.py) looks only at calls
-- not done that have not moved for a while; the result takes the call out.
local moving_key = moving_index(string.sub(call, #K.CALL_PREFIX + 1), K.MOVING_CALLS)
local function moved()
  redis.call('ZADD', moving_key, now_ms(), A.call_id)
end

local function keep_for_retention()
  redis.call('EXPIRE', call, A.retention_s)
  redis.call('EXPIRE', events, A.retention_s)
end

-- Write the call's result once: the first of a worker's result and a cancellation wins.
local function finish(result, ev)
  if redis.call('HSETNX', call, CF.RESULT, result) == 0 then return false end
  redis.call('HSET', call, CF.STATUS, CALL.DONE, CF.FINISHED_AT, A.at)
  emit(ev)
  keep_for_retention()
  redis.call('ZREM', moving_key, A.call_id)
  return true
end
