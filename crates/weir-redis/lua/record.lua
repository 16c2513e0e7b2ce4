-- record.lua: a key's Record as one Redis string: load it (rebasing its instants when now
-- has moved far from its base) and write it back with a TTL that ends when it is fresh again.
-- Mirrors crates/weir-core/src/state.rs (Record, Guard); the layout is documented in
-- crates/weir-redis/src/lib.rs ("Key layout").
-- Fields: a = algorithm tag, b = base (whole seconds since the epoch), x = expires
-- (offset), gb/gs/ge = the guard (blocked until, strikes, strikes expire; present iff
-- there is a guard), then the algorithm's own fields (see its file). As text:
--   '<a> <b> <x>' [';<gb> <gs> <ge>'] then ' <field>' for each of the algorithm's fields,
-- numbers in decimal; a variable-size field (sliding-window buckets, leases) is last, as
-- raw bytes up to the end. So the byte after x says whether a guard follows, and a
-- guardless record of one algorithm is one pattern (fast.lua matches it so).
local R = {}

local KNOWN = { fw = true, sl = true, ww = true, tb = true, lb = true, gc = true, lq = true, cc = true,
  gw = true, tw = true }

-- The record at key, as seen at (sec, nsec), from its GET (`raw`, read here when nil;
-- false when the key is absent). rec.now is now as an offset from rec.base; rec.st is
-- decoded lazily (S.state) from rec.body, the algorithm's fields, once the rule says
-- which algorithm it must be.
function R.load(key, sec, nsec, raw)
  if raw == nil then
    raw = redis.pcall('GET', key)
  end
  if raw == false then
    return { key = key, held = false, base = sec, now = nsec, shift = 0, x = PAST }
  end
  if type(raw) ~= 'string' then
    -- WRONGTYPE: a hash (an older Weir's record) or anything else; never overwritten.
    fail('corrupt', 'not a string record')
  end
  local a, b, x, pos = string.match(raw, '^(%l%l) (%-?%d+) (%-?%d+)()')
  local base = tonumber(b)
  if base == nil or not KNOWN[a] then
    fail('corrupt', 'base or algorithm')
  end
  local now, shift = (sec - base) * SEC_NS + nsec, 0
  if now > REBASE_NS or now < -REBASE_NS then
    -- Rebase onto now's second: every stored instant moves by the same exact amount.
    shift = (sec - base) * SEC_NS
    base, now = sec, nsec
  end
  local rec = { key = key, held = true, base = base, now = now, shift = shift, alg = a }
  rec.raw, rec.ob, rec.ox = raw, b, x
  rec.x = instant(x, shift)
  if rec.x == nil then
    fail('corrupt', 'expiry')
  end
  -- Held means held and live: an expired record is no record (`step::keep`).
  rec.live = rec.x > now
  if string.sub(raw, pos, pos) == ';' then
    local gb, gs, ge, after = string.match(raw, '^;(%-?%d+) (%-?%d+) (%-?%d+)()', pos)
    local g = { b = instant(gb, shift), s = tonumber(gs), e = instant(ge, shift) }
    if g.b == nil or g.s == nil or g.e == nil then
      fail('corrupt', 'guard')
    end
    rec.g, pos = g, after
  end
  rec.body = string.sub(raw, pos)
  return rec
end

-- The record as text, checked against the horizon before anything is written: { text,
-- keep_ttl }, keep_ttl when the stored base and expiry (hence the TTL) stay as they are.
function R.encode(rec)
  if rec.x - rec.now > REACH_NS then
    fail('horizon', 'expiry')
  end
  local bt, xt = fmt(rec.base), fmt(rec.x)
  local head = rec.alg .. ' ' .. bt .. ' ' .. xt
  local g = rec.g
  if g ~= nil then
    head = head .. ';' .. fmt(g.b) .. ' ' .. fmt(g.s) .. ' ' .. fmt(g.e)
  end
  return { text = head .. ALG[rec.alg].encode(rec.st), keep_ttl = rec.ob == bt and rec.ox == xt }
end

-- Writes the record with one SET: the TTL until the record is fresh again (rounded up to
-- the millisecond) plus the configured grace, or KEEPTTL when the expiry did not move (the
-- TTL, an absolute instant, stays right). A held record that did not change (a denial, a
-- peek) costs no write at all.
function R.write(rec, enc, grace_ms)
  if enc.text == rec.raw then
    return
  end
  if enc.keep_ttl then
    redis.call('SET', rec.key, enc.text, 'KEEPTTL')
  else
    redis.call('SET', rec.key, enc.text, 'PX', fmt(N.div_ceil(rec.x - rec.now, 1000000) + grace_ms))
  end
end
