-- record.lua: a key's Record as a Redis hash: load it (rebasing its instants when now has
-- moved far from its base) and write it back with a TTL that ends when it is fresh again.
-- Mirrors crates/weir-core/src/state.rs (Record, Guard); the layout is documented in
-- crates/weir-redis/src/lib.rs ("Key layout").
-- Fields: b = base (whole seconds since the epoch), x = expires (offset), a = algorithm
-- tag, gb/gs/ge = the guard (blocked until, strikes, strikes expire; present iff there
-- is a guard), then the algorithm's own fields (see its file).
local R = {}

local KNOWN = { fw = true, sl = true, ww = true, tb = true, lb = true, gc = true, lq = true, cc = true }

-- The record at key, as seen at (sec, nsec), from its HGETALL (`raw`, read here when
-- nil). rec.now is now as an offset from rec.base; rec.st is decoded lazily (S.state),
-- once the rule says which algorithm it must be.
function R.load(key, sec, nsec, raw)
  raw = raw or redis.pcall('HGETALL', key)
  if raw.err then
    fail('corrupt', 'not a hash')
  end
  if #raw == 0 then
    return { key = key, held = false, base = sec, now = nsec, shift = 0, x = PAST }
  end
  local f = {}
  for i = 1, #raw, 2 do
    f[raw[i]] = raw[i + 1]
  end
  local base = tonumber(f.b)
  if base == nil or not KNOWN[f.a] then
    fail('corrupt', 'base or algorithm')
  end
  local now, shift = (sec - base) * SEC_NS + nsec, 0
  if now > REBASE_NS or now < -REBASE_NS then
    -- Rebase onto now's second: every stored instant moves by the same exact amount.
    shift = (sec - base) * SEC_NS
    base, now = sec, nsec
  end
  local rec = { key = key, held = true, base = base, now = now, shift = shift, f = f, alg = f.a }
  rec.x = instant(f.x, shift)
  if rec.x == nil then
    fail('corrupt', 'expiry')
  end
  -- Held means held and live: an expired record is no record (`step::keep`).
  rec.live = rec.x > now
  if f.gs ~= nil then
    local g = { b = instant(f.gb, shift), s = tonumber(f.gs), e = instant(f.ge, shift) }
    if g.b == nil or g.s == nil or g.e == nil then
      fail('corrupt', 'guard')
    end
    rec.g = g
  end
  return rec
end

-- The hash fields of a record, checked against the horizon before anything is written.
function R.fields(rec)
  if rec.x - rec.now > REACH_NS then
    fail('horizon', 'expiry')
  end
  local out = { 'b', fmt(rec.base), 'x', fmt(rec.x), 'a', rec.alg }
  local g = rec.g
  if g ~= nil then
    out[7], out[8] = 'gb', fmt(g.b)
    out[9], out[10] = 'gs', fmt(g.s)
    out[11], out[12] = 'ge', fmt(g.e)
  end
  ALG[rec.alg].encode(rec.st, out)
  return out
end

-- Writes `fields` and sets the TTL: until the record is fresh again (rounded up to the
-- millisecond), plus the configured grace. Only what changed is written: a held record
-- that did not change (a denial, a peek) costs no write at all, and its TTL, an absolute
-- instant, stays right.
function R.write(rec, fields, grace_ms)
  local old = rec.f
  local expire = true
  if old == nil then
    redis.call('HSET', rec.key, unpack(fields))
  else
    local changed, seen = {}, {}
    for i = 1, #fields, 2 do
      local name, value = fields[i], fields[i + 1]
      seen[name] = true
      if old[name] ~= value then
        changed[#changed + 1] = name
        changed[#changed + 1] = value
      end
    end
    local stale = {}
    for name in pairs(old) do
      if not seen[name] then
        stale[#stale + 1] = name
      end
    end
    if #stale > 0 then
      redis.call('HDEL', rec.key, unpack(stale))
    end
    if #changed > 0 then
      redis.call('HSET', rec.key, unpack(changed))
    end
    expire = old.b ~= fields[2] or old.x ~= fields[4]
  end
  if expire then
    redis.call('PEXPIRE', rec.key, fmt(N.div_ceil(rec.x - rec.now, 1000000) + grace_ms))
  end
end
