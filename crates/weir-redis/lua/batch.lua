-- batch.lua: the entry point of a batch: several operations, each on one key, coalesced
-- from concurrent Store::apply calls into one script call (src/batch.rs). They run one
-- after another, each exactly as single.lua runs it (the fast path, then S.one), so a key
-- given twice sees the first operation's result. A weir refusal fails only its own
-- operation. The records are read with one MGET for the whole batch.
-- KEYS = the distinct records. ARGV: 1 TTL grace in ms, 2 the number of operations, then
-- per operation 13 fields: the index of its key in KEYS, seconds ('' = the store clock,
-- read once for the batch), nanoseconds, then the operation and its rule (S.one).
-- Reply: one reply of S.reply (or {-1, code, message}) per operation, in order.
return S.run(function()
  local grace_ms, count = tonumber(ARGV[1]), tonumber(ARGV[2])
  local store_sec, store_nsec
  -- Every record read at once; then each key's string as this batch leaves it, or nil
  -- once the general path has run on it (read again by the next operation on it).
  local seen = redis.call('MGET', unpack(KEYS))
  local replies = {}
  for i = 1, count do
    local at = 3 + (i - 1) * 13
    local sec, nsec
    if ARGV[at + 1] == '' then
      if store_sec == nil then
        store_sec, store_nsec = clock('', '')
      end
      sec, nsec = store_sec, store_nsec
    else
      sec, nsec = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    end
    local slot = tonumber(ARGV[at])
    local key = KEYS[slot]
    local ok, res, raw = pcall(FAST, key, sec, nsec, grace_ms, ARGV, at + 3, seen[slot])
    if ok and res ~= nil then
      seen[slot] = raw
    elseif ok then
      seen[slot] = nil
      if type(raw) ~= 'string' then
        raw = nil -- MGET's false may be another type: S.one reads the key itself
      end
      ok, res = pcall(S.one, key, sec, nsec, grace_ms, ARGV, at + 3, raw)
    end
    if ok then
      replies[i] = res
    elseif type(res) == 'table' and res.weir ~= nil then
      replies[i] = { -1, res.weir, res.msg }
    else
      error(res, 0)
    end
  end
  return replies
end)
