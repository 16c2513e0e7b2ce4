-- single_fast.lua: the head of one operation on one key (Store::apply), run before the
-- general path is even defined: reads the clock and tries the fast path (fast.lua); its
-- answer is the script's, otherwise single.lua runs the general step.
-- KEYS[1] = the record. ARGV: 1 TTL grace in ms, 2 seconds ('' = the store clock, TIME),
-- 3 nanoseconds, 4.. the operation and its rule (S.one).
local FAST_SEC, FAST_NSEC, FAST_RAW
do
  local ok, reply = pcall(function()
    FAST_SEC, FAST_NSEC = clock(ARGV[2], ARGV[3])
    local answer
    answer, FAST_RAW = FAST(KEYS[1], FAST_SEC, FAST_NSEC, tonumber(ARGV[1]), ARGV, 4)
    return answer
  end)
  if not ok then
    return failure(reply)
  end
  if reply ~= nil then
    return reply
  end
end
