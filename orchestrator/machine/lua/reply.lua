-- reply: a transition's one answer.
-- Needs: nothing.
-- Defines: reply(outcome, fields) -> the JSON object {outcome = outcome, ...fields}, the
--   typed reply model the store parses (each machine's `Reply`).
local function reply(outcome, fields)
  local r = fields or {}
  r.outcome = outcome
  return cjson.encode(r)
end
