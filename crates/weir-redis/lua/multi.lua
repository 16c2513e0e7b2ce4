-- multi.lua: the entry point of several limits checked at once (Store::check_all).
-- Mirrors crates/weir-testkit/src/model.rs `Model::check_all`: every limit is decided on
-- a copy of its key's record; the copies are written back only if all allow, except
-- that a record with a denied limit is written back too (its lockout). A key given twice
-- is loaded once and its limits apply in turn to the same record; an expired record is
-- read as fresh (not held).
-- KEYS = the distinct records. ARGV: 1 TTL grace in ms, 2 seconds ('' = TIME), 3
-- nanoseconds, 4 cost, 5 the number of limits L, then per limit: the index of its key in
-- KEYS and its rule (S.rule), 2 fields each.
-- Reply: {5, allowed, then per limit: allowed, remaining, reset, retry, delay}.
return S.run(function()
  local grace_ms = tonumber(ARGV[1])
  local sec, nsec = clock(ARGV[2], ARGV[3])
  local cost, count = tonumber(ARGV[4]), tonumber(ARGV[5])
  local recs = {}
  for i = 1, #KEYS do
    recs[i] = R.load(KEYS[i], sec, nsec)
  end
  local each, slot_of, allowed = {}, {}, true
  for i = 1, count do
    local at = 6 + (i - 1) * 2
    local slot = tonumber(ARGV[at])
    local rec = recs[slot]
    local p = S.rule(ARGV[at + 1])
    local _, d = S.apply(p, rec, 'c', cost, '', rec.now)
    each[i], slot_of[i] = d, slot
    allowed = allowed and d.ok
  end
  -- A record is written back when every limit allowed, or when one of its own limits
  -- was denied (for the lockout); a key given twice is one record.
  local denied_here = {}
  for i, d in ipairs(each) do
    if not d.ok then
      denied_here[slot_of[i]] = true
    end
  end
  local actions, encs = {}, {}
  for j, rec in ipairs(recs) do
    actions[j] = 'keep'
    if cost > 0 and (allowed or denied_here[j]) then
      if rec.x > rec.now then
        actions[j], encs[j] = 'write', R.encode(rec)
      else
        actions[j] = 'delete'
      end
    end
  end
  for j, rec in ipairs(recs) do
    S.commit(rec, actions[j], encs[j], grace_ms)
  end
  local reply = { 5, allowed and 1 or 0 }
  for _, d in ipairs(each) do
    reply[#reply + 1] = d.ok and 1 or 0
    reply[#reply + 1] = d.rem
    reply[#reply + 1] = d.reset
    reply[#reply + 1] = d.retry
    reply[#reply + 1] = d.delay
  end
  return reply
end)
