-- publish_workflow: a workflow's definition as its next version, unless it is the latest.
-- KEYS[1] the published workflows (hash: name -> latest version, name@version -> definition).
-- ARGV[1] the name; ARGV[2] the definition's canonical JSON.
-- Replies {version, 1} when the definition became that new version; {latest, 0} when it
--   is the latest version already (publishing again changes nothing).
-- Effects sets name@version and name on a new version; never removes a version.
local latest = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if latest > 0 and redis.call('HGET', KEYS[1], ARGV[1] .. '@' .. latest) == ARGV[2] then
  return {latest, 0}
end
latest = latest + 1
redis.call('HSET', KEYS[1], ARGV[1] .. '@' .. latest, ARGV[2], ARGV[1], latest)
return {latest, 1}
