-- record.lua: a key's Record as a Redis hash: load it (rebasing its instants when now has
-- moved far from its base) and write it back with a TTL that ends when it is fresh again.
-- Mirrors crates/weir-core/src/state.rs (Record, Guard); the layout is documented in
-- crates/weir-redis/src/lib.rs ("Key layout").
-- Fields: b = base (whole seconds since the epoch), x = expires (offset), a = algorithm
-- tag, gb/gs/ge = the guard (blocked until, strikes, strikes expire; present iff there
-- is a guard), then the algorithm's own fields (see its file).
local R = {}

local KNOWN = { fw = true, sl = true, ww = true, tb = true, lb = true, gc = true, lq = true, cc = true }

-- The record at key, as seen at (sec, nsec). rec.now is now as an offset from rec.base;
-- rec.st is decoded lazily (S.state), once the rule says which algorithm it must be.
function R.load(key, sec, nsec)
  local raw = redis.pcall('HGETALL', key)
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

-- Replaces the hash with `fields` and sets its TTL: until the record is fresh again
-- (rounded up to the millisecond), plus the configured grace.
function R.write(rec, fields, grace_ms)
  redis.call('DEL', rec.key)
  redis.call('HSET', rec.key, unpack(fields))
  redis.call('PEXPIRE', rec.key, fmt(N.div_ceil(rec.x - rec.now, 1000000) + grace_ms))
end
