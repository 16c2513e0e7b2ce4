-- single.lua: the entry point of one operation on one key (Store::apply).
-- Mirrors crates/weir-testkit/src/model.rs `Model::apply`: load the record, run the step,
-- store it iff it is live (and held, or the operation adds usage), delete it otherwise.
-- KEYS[1] = the record. ARGV: 1 seconds ('' = the store clock, TIME), 2 nanoseconds,
-- 3 TTL grace in ms, 4 operation (see S.apply), 5 its number (cost, units, duration or
-- TTL in ns), 6 the holder, 7..13 the rule (S.rule).
return S.run(function()
  local sec, nsec = T.now(ARGV[1], ARGV[2])
  local grace_ms = tonumber(ARGV[3])
  local op, n, holder = ARGV[4], tonumber(ARGV[5]) or 0, ARGV[6]
  local p = S.rule(ARGV, 7)
  local rec = R.load(KEYS[1], sec, nsec)
  local kind, out = S.apply(p, rec, op, n, holder, rec.now)
  local action, fields = S.prepare(rec, S.creates(op, n))
  S.commit(rec, action, fields, grace_ms)
  return S.reply(kind, out)
end)
