-- single.lua: the entry point of one operation on one key (Store::apply), when the fast
-- path (single_fast.lua) did not answer it: the general step, on the clock and the
-- HGETALL the fast path already read.
return S.run(function()
  return S.one(KEYS[1], FAST_SEC, FAST_NSEC, tonumber(ARGV[1]), ARGV, 4, FAST_RAW)
end)
