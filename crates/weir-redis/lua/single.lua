-- single.lua: the entry point of one operation on one key (Store::apply).
-- KEYS[1] = the record. ARGV: 1 TTL grace in ms, 2 seconds ('' = the store clock, TIME),
-- 3 nanoseconds, 4.. the operation and its rule (S.one).
return S.run(function()
  local sec, nsec = T.now(ARGV[2], ARGV[3])
  return S.one(KEYS[1], sec, nsec, tonumber(ARGV[1]), ARGV, 4)
end)
