-- rate_acquire: a ticket for one provider call, if the quota has room (a sliding log:
--   workers/models/ratelimit.py). Time comes from Redis so that worker clocks do not matter.
-- KEYS    [1] the quota's key prefix (its log, spent hash, spent sum, back-off and learned
--         limits derive from it: one slot).
-- ARGV    [1] tokens, [2] configured rpm, [3] configured tpm (0 = none), [4] window ms,
--         [5] the ticket.
-- Replies {wait_ms, ''} when over a limit (or backing off), or {0, ticket, admitted at
--         (ms, the ticket's score)}.
-- Effects tickets older than the window dropped; the ticket logged with its tokens.
-- @include clock

local now = now_ms()
local until_ms = tonumber(redis.call('GET', KEYS[1] .. ':backoff') or '0')
if until_ms > now then return {until_ms - now, ''} end
local span = tonumber(ARGV[4])
local log, spent, sum = KEYS[1] .. ':log', KEYS[1] .. ':spent', KEYS[1] .. ':spent-sum'
local expired = redis.call('ZRANGEBYSCORE', log, '-inf', now - span)
if #expired > 0 then
  local freed = 0
  for _, ticket in ipairs(expired) do
    freed = freed + (tonumber(redis.call('HGET', spent, ticket)) or 0)
    redis.call('HDEL', spent, ticket)
  end
  redis.call('DECRBY', sum, freed)
  redis.call('ZREMRANGEBYSCORE', log, '-inf', now - span)
end
local function limit(configured, learned)
  configured = tonumber(configured) or 0
  learned = tonumber(learned) or 0
  if configured > 0 and learned > 0 then return math.min(configured, learned) end
  return math.max(configured, learned)
end
local learned = redis.call('HMGET', KEYS[1] .. ':learned', 'rpm', 'tpm')
local rpm = limit(ARGV[2], learned[1])
local tpm = limit(ARGV[3], learned[2])
local reqs = redis.call('ZCARD', log)
local used = tonumber(redis.call('GET', sum) or '0')
local tokens = tonumber(ARGV[1])
-- Over a limit: wait until the oldest ticket leaves the window (then look again).
local oldest = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
local wait = span
if oldest[2] then wait = tonumber(oldest[2]) + span - now + 1 end
if rpm > 0 and reqs >= rpm then return {wait, ''} end
-- A call bigger than the whole budget still runs alone in an empty window.
if tpm > 0 and used > 0 and used + tokens > tpm then return {wait, ''} end
redis.call('ZADD', log, now, ARGV[5])
redis.call('HSET', spent, ARGV[5], tokens)
redis.call('INCRBY', sum, tokens)
for _, key in ipairs({log, spent, sum}) do redis.call('PEXPIRE', key, 2 * span + 60000) end
return {0, ARGV[5], now}
