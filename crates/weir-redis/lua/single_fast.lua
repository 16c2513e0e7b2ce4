-- single_fast.lua: the head of one operation on one key (Store::apply), run before the
-- general path is even defined: tries the fast path (fast.lua), which also reads the
-- clock; its answer is the script's, otherwise single.lua runs the general step.
-- KEYS[1] = the record. ARGV: 1 TTL grace in ms, 2 seconds ('' = the store clock, TIME),
-- 3 nanoseconds, 4-6 the operation, 7 its rule (S.one).
-- The fast path's reply is a decision as text, 'allowed remaining reset retry' (decimal,
-- no delay; src/reply.rs), which Redis converts for less than a table.
-- FAST_OK false: FAST_A is the error. FAST_A nil: FAST_B is the record's GET and FAST_C,
-- FAST_D the clock, for single.lua.
local FAST_OK, FAST_A, FAST_B, FAST_C, FAST_D = pcall(FAST, KEYS[1], nil, nil, nil, ARGV, 4, 7)
if FAST_OK and FAST_A ~= nil then
  return FAST_A .. ' ' .. fmt(FAST_B) .. ' ' .. fmt(FAST_C) .. ' ' .. fmt(FAST_D)
end
