-- fast.lua: the fast path of the plain check. One operation `c` (a check, or a peek at
-- cost 0) on a key whose record is absent, or holds this algorithm's state and nothing
-- else (no block, no lockout strikes, no rebase due), under an algorithm that registered
-- a fast adapter (FASTS: GCRA, the token bucket, the fixed window, the sliding log /
-- window counter). No algorithm is written here: the adapter in the algorithm's own file
-- calls the step that the general path calls too. This file is the general path's frame
-- (R.load, S.apply, S.prepare and R.write in record.lua and step.lua) cut to that case,
-- straight-line: no closures and no tables of its own, `until` written as max(later -
-- now, 0). The record is read with one pattern match on the string (record.lua's layout,
-- without a guard: the adapter's `shape`).
-- Anything else (another operation, a record with a guard, another algorithm's record or
-- a corrupt one, a rebase, a window whose epoch phase needs long multiplication, a
-- lockout that engages, a refusal at the horizon) makes it give up before writing
-- anything: FAST returns nil, the GET it read and the clock it read (if any), and
-- the general path starts over from those. It is defined before the general path, so a
-- single script under EVALSHA (single_fast.lua) whose call it answers never runs the rest
-- of the chunk.
-- weir-testkit's conformance suite, run with and without this file (src/scripts.rs
-- `Variant`), on the single and the batch entry points, checks both paths against the model.

-- The plain check of `argv[i..]` (S.one's layout: the operation at i, its rule at r) on
-- `key` at (sec, nsec): the decision as allowed (1 or 0), remaining, reset and retry (ns;
-- no delay), then the key's string as it now stands (false when there is none); or nil,
-- the key's GET (when read here) and (sec, nsec) when the general path must decide. (No
-- reply table: Redis pays for each table it converts, and the callers need none.)
-- With sec nil (single_fast.lua), the clock and the grace are read from ARGV 1-3 as
-- single.lua reads them, and the clock only once the call is known to be a plain check.
-- `seen` is the key's string when the caller read it already (batch.lua's MGET), false
-- when that read found no string (absent, or another type: MGET cannot tell, so a key
-- seen as false is written only with NX, and a peek checks that it does not exist).
local function FAST(key, sec, nsec, grace_ms, argv, i, r, seen)
  local text = argv[r]
  local tag = string.sub(text, 1, 2)
  local A = FASTS[tag]
  if A == nil or argv[i] ~= 'c' then
    return nil
  end
  local p = rule(text)
  if p == nil then
    return nil
  end
  local cost = tonumber(argv[i + 1]) or 0
  if sec == nil then
    -- `clock` (prelude.lua)
    if argv[2] == '' then
      local t = redis.call('TIME')
      sec, nsec = tonumber(t[1]), tonumber(t[2]) * 1000
    else
      sec, nsec = tonumber(argv[2]), tonumber(argv[3])
    end
    grace_ms = tonumber(argv[1])
  end

  -- R.load: the record, or none.
  local raw = seen
  if raw == nil then
    raw = redis.pcall('GET', key)
    if type(raw) == 'table' then
      return nil, raw, sec, nsec -- not a string: the general path reports it
    end
  end
  local held, live, base, now = false, false, sec, nsec
  local ob, ox, v1, v2 -- the stored texts of b, x and the first two state fields
  if raw then
    ob, ox, v1, v2 = string.match(raw, A.shape)
    if ob == nil then
      return nil, raw, sec, nsec -- a guard, another algorithm's record, or a stranger's
    end
    base = tonumber(ob)
    now = (sec - base) * SEC_NS + nsec
    if now > REBASE_NS or now < -REBASE_NS then
      return nil, raw, sec, nsec
    end
    -- Held means held and live: an expired record is no record (`step::keep`).
    held, live = true, tonumber(ox) > now
  end

  -- The algorithm's check on its state (decoded when live, fresh otherwise), then
  -- `fresh_at`: the decision, the new expiry nx, the state as the record's fields, the
  -- count to bound, and (when the adapter has it) nx as text.
  local ok, rem, reset, retry, nx, fields, units, xt = A.fast(p, live, v1, v2, raw, now, base, cost)
  if ok == nil then
    return nil, raw, sec, nsec
  end
  if not ok and p.lock_base ~= nil and cost > 0 then
    return nil, raw, sec, nsec -- the lockout engages: the general path blocks the key
  end
  local allowed = 0
  if ok then
    allowed = 1
  end

  -- S.prepare and R.write: store the record if it is live and may be stored (one SET,
  -- only if it changed; KEEPTTL when the expiry did not move), delete it if it is held
  -- and not live.
  if nx > now and (live or cost > 0) then
    if nx - now > REACH_NS or units > MAX_UNITS then
      return nil, raw, sec, nsec -- a refusal at the horizon: the general path makes it
    end
    -- The base's text is the one read, unless there was none.
    local bt = ob or fmt(base)
    xt = xt or fmt(nx)
    local record = tag .. ' ' .. bt .. ' ' .. xt .. fields
    if record ~= raw then
      if held and ox == xt then
        redis.call('SET', key, record, 'KEEPTTL')
      else
        local ms, sub_ms = divmod(nx - now, 1000000) -- div_ceil
        if sub_ms > 0 then
          ms = ms + 1
        end
        -- A number argument: Redis writes an integer below 2^53 in plain digits.
        if held then
          redis.call('SET', key, record, 'PX', ms + grace_ms)
        elseif not redis.call('SET', key, record, 'PX', ms + grace_ms, 'NX') then
          return nil, nil, sec, nsec -- not absent after all: another type (read as seen)
        end
      end
    end
    return allowed, rem, reset, retry, record
  elseif held then
    redis.call('DEL', key)
  elseif seen == false and redis.call('EXISTS', key) == 1 then
    return nil, nil, sec, nsec -- a peek at a key that holds another type
  end
  return allowed, rem, reset, retry, false
end
