-- batch.lua: the entry point of a batch: several operations, each on one key, coalesced
-- from concurrent Store::apply calls into one script call (src/batch.rs). They run one
-- after another, each exactly as single.lua runs it (the fast path, then S.one), so a key
-- given twice sees the first operation's result. A weir refusal fails only its own
-- operation. The records are read with one MGET for the whole batch.
-- KEYS = the distinct records. ARGV: 1 TTL grace in ms, 2 the number of operations N, 3
-- the number of distinct rules R, then the R rules (S.rule, one field each), then per
-- operation 7 fields: the index of its key in KEYS, the index of its rule, seconds ('' =
-- the store clock, read once for the batch), nanoseconds, then the operation (S.one).
-- Reply: one flat array: per operation, the length of its reply of S.reply (or {-1, code,
-- message}), then that reply's items. (A table per operation would cost Redis a reply
-- node each.)
return S.run(function()
  local grace_ms, count, rules = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  local store_sec, store_nsec
  -- Every record read at once; then each key's string as this batch leaves it, or nil
  -- once the general path has run on it (read again by the next operation on it).
  local seen = redis.call('MGET', unpack(KEYS))
  local out, n = {}, 0
  for i = 1, count do
    local at = 4 + rules + (i - 1) * 7
    local sec, nsec
    if ARGV[at + 2] == '' then
      if store_sec == nil then
        store_sec, store_nsec = clock('', '')
      end
      sec, nsec = store_sec, store_nsec
    else
      sec, nsec = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
    end
    local slot = tonumber(ARGV[at])
    local key, r = KEYS[slot], 3 + ARGV[at + 1]
    -- FAST raises nothing of its own (it gives up instead), so it needs no pcall: an
    -- error of Redis's fails the batch, as below.
    local allowed, rem, reset, retry, now_raw = FAST(key, sec, nsec, grace_ms, ARGV, at + 4, r, seen[slot])
    if allowed ~= nil then
      seen[slot] = now_raw
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = 6, 1, allowed, rem
      out[n + 5], out[n + 6], out[n + 7] = reset, retry, 0
      n = n + 7
    else
      seen[slot] = nil
      local raw = rem -- what FAST read
      if type(raw) ~= 'string' then
        raw = nil -- MGET's false may be another type: S.one reads the key itself
      end
      local ok, res = pcall(S.one, key, sec, nsec, grace_ms, ARGV, at + 4, r, raw)
      if not ok then
        if type(res) == 'table' and res.weir ~= nil then
          res = { -1, res.weir, res.msg }
        else
          error(res, 0)
        end
      end
      out[n + 1] = #res
      for j = 1, #res do
        out[n + 1 + j] = res[j]
      end
      n = n + 1 + #res
    end
  end
  return out
end)
