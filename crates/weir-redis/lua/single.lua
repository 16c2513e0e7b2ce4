-- single.lua: the entry point of one operation on one key (Store::apply), when the fast
-- path (single_fast.lua) did not answer it: the general step, on the clock and the
-- GET the fast path read, if it got that far.
if not FAST_OK then
  return failure(FAST_A)
end
return S.run(function()
  local sec, nsec = FAST_C, FAST_D
  if sec == nil then
    sec, nsec = clock(ARGV[2], ARGV[3])
  end
  return S.one(KEYS[1], sec, nsec, tonumber(ARGV[1]), ARGV, 4, 7, FAST_B)
end)
