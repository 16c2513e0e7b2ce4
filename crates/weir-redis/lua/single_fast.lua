-- single_fast.lua: the head of one operation on one key (Store::apply), run before the
-- general path is even defined: tries the fast path (fast.lua), which also reads the
-- clock; its answer is the script's, otherwise single.lua runs the general step.
-- KEYS[1] = the record. ARGV: 1 TTL grace in ms, 2 seconds ('' = the store clock, TIME),
-- 3 nanoseconds, 4-6 the operation, 7-13 its rule (S.one).
local FAST_OK, FAST_REPLY, FAST_RAW, FAST_SEC, FAST_NSEC = pcall(FAST, KEYS[1], nil, nil, nil, ARGV, 4, 7)
if FAST_OK and FAST_REPLY ~= nil then
  return FAST_REPLY
end
