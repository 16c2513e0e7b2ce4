-- fast.lua: the fast path of the plain check. One operation `c` (a check, or a peek at
-- cost 0) on a key whose record is absent, or holds this algorithm's state and nothing
-- else (no block, no lockout strikes, no rebase due), under GCRA, the token bucket, the
-- fixed window or the sliding log / window counter. It computes exactly what the general
-- path would (R.load, S.apply, S.prepare and R.write in record.lua and step.lua, then the
-- algorithm's `check` and `fresh_at` in its own file; each step below names its
-- original), straight-line: no closures, no dispatch, no tables but the reply, `until`
-- written as max(later - now, 0). The record is read with one pattern match on the
-- string (record.lua's layout, without a guard).
-- Anything else (another operation, a record with a guard, another algorithm's record or
-- a corrupt one, a rebase, a window whose epoch phase needs long multiplication, a
-- lockout that engages, a refusal at the horizon) makes it give up before writing
-- anything: FAST returns nil, the GET it read and the clock it read (if any), and
-- the general path starts over from those. It is defined before the general path, so a
-- single script (single_fast.lua) whose call it answers never runs the rest of the chunk.
-- The rule's numbers come from the Rust side (src/encode.rs), always decimal: they are
-- converted by arithmetic (`+ 0`, as tonumber would, at half the cost).
-- weir-testkit's conformance suite, run on both the single and the batch scripts,
-- exercises both paths against the model.

-- T.align (prelude.lua) for the offset x from `base`: the start of the epoch-aligned
-- period of w ns containing x, or nil when the phase (base * 10^9 mod w) is not
-- computed here. The phase is exact: below 2^30 the product is split into 16-bit
-- halves of base (every partial product < 2^47), and a whole number of seconds gives
-- (base mod seconds) * 10^9.
local function fast_align(base, x, w)
  if w == 1 then
    return x
  end
  if base < 0 or base >= 4294967296 or base % 1 ~= 0 then
    return nil
  end
  local phase
  if w <= 1073741824 then
    local m = SEC_NS % w
    local low = base % 65536
    local high = (base - low) / 65536
    phase = (((high * m) % w) * 65536 + low * m) % w
  elseif w % SEC_NS == 0 then
    phase = (base % (w / SEC_NS)) * SEC_NS
  else
    return nil
  end
  local _, r = divmod(phase + x, w)
  return x - r
end

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
  local max, min = math.max, math.min
  -- The record of a guardless key of this algorithm (record.lua's layout): b, x, then
  -- the state fields (see the algorithm's file); the sliding buckets are raw bytes from
  -- the position captured last.
  local tag, shape = argv[r], nil
  if tag == 'gc' then
    shape = '^gc (%-?%d+) (%-?%d+) (%-?%d+)$'
  elseif tag == 'tb' then
    shape = '^tb (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+)$'
  elseif tag == 'fw' then
    shape = '^fw (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+)$'
  elseif tag == 'sl' then
    shape = '^sl (%-?%d+) (%-?%d+) (%-?%d+) ()'
  else
    return nil
  end
  if argv[i] ~= 'c' then
    return nil
  end
  local cost = tonumber(argv[i + 1]) or 0
  local lockout = argv[r + 4] ~= ''
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
  local held, live, base, now, x = false, false, sec, nsec, PAST
  local ob, ox, v1, v2 -- the stored texts of b, x and the state fields
  if raw then
    ob, ox, v1, v2 = string.match(raw, shape)
    if ob == nil then
      return nil, raw, sec, nsec -- a guard, another algorithm's record, or a stranger's
    end
    if tag == 'sl' then
      -- v1 = the buckets (raw bytes to the end), v2 = their total
      v1, v2 = string.sub(raw, v2), v1
    end
    base, x = tonumber(ob), tonumber(ox)
    now = (sec - base) * SEC_NS + nsec
    if now > REBASE_NS or now < -REBASE_NS then
      return nil, raw, sec, nsec
    end
    -- Held means held and live: an expired record is no record (`step::keep`).
    held, live = true, x > now
  end

  -- The algorithm's `check` on its state (decoded when live, fresh otherwise), then
  -- `fresh_at`: the decision, the new expiry nx, and the state as field texts.
  local ok, rem, reset, retry = 1, 0, 0, 0
  local nx, n1, n2, units, xt = PAST, nil, nil, 0, nil
  if tag == 'gc' then
    local interval, tolerance = argv[r + 2] + 0, argv[r + 3] + 0
    local t = PAST
    if live then
      t = tonumber(v1)
      if t == nil then
        return nil, raw, sec, nsec
      end
    end
    local tat = max(t, now)
    local new_tat = tat + max(cost, 1) * interval
    local at = tat
    if new_tat - now <= tolerance then
      if cost ~= 0 then
        t, at = new_tat, new_tat
      end
    else
      ok, retry = 0, max(new_tat - tolerance - now, 0)
    end
    rem = divmod(max(tolerance - max(at - now, 0), 0), interval)
    reset = max(at - now, 0)
    nx, n1 = t, fmt(t)
    xt = n1
  elseif tag == 'tb' then
    local capacity, interval, initial =
      argv[r + 1] + 0, argv[r + 2] + 0, argv[r + 3] + 0
    local t, l = initial, now
    if live then
      t, l = tonumber(v1), tonumber(v2)
      if t == nil or l == nil then
        return nil, raw, sec, nsec
      end
    end
    -- refill
    local tokens, last = min(t, capacity), l
    if now > last then
      local added = divmod(now - last, interval)
      tokens = min(tokens + added, capacity)
      if tokens == capacity then
        last = now
      else
        last = last + added * interval
      end
    end
    local want = max(cost, 1)
    if tokens >= want then
      if cost > 0 then
        tokens = tokens - cost
        t, l = tokens, last
      end
    else
      ok, retry = 0, max(last + (want - tokens) * interval - now, 0)
    end
    rem, reset = tokens, max(last + max(capacity - tokens, 0) * interval - now, 0)
    nx = l + max(capacity - min(t, capacity), 0) * interval
    if initial < capacity then
      nx = nx + capacity * interval
    end
    n1, n2 = fmt(t), fmt(l)
  elseif tag == 'fw' then
    local limit, window = argv[r + 1] + 0, argv[r + 2] + 0
    local start = fast_align(base, now, window)
    if start == nil then
      return nil, raw, sec, nsec
    end
    local s, c = start, 0
    if live then
      s, c = tonumber(v1), tonumber(v2)
      if s == nil or c == nil then
        return nil, raw, sec, nsec
      end
    end
    -- current: the same window, or a lagging clock counting into the newer one
    local cs, cc = start, 0
    if s >= start then
      cs, cc = s, c
    end
    reset = max(cs + window - now, 0)
    if cc + max(cost, 1) <= limit then
      if cost > 0 then
        cc = cc + cost
        s, c = cs, cc
      end
      rem = limit - cc
    else
      ok, rem, retry = 0, max(limit - cc, 0), reset
    end
    if c ~= 0 then
      nx = s + window
    end
    n1, n2, units = fmt(s), fmt(c), c
  else
    local limit, window, precision =
      argv[r + 1] + 0, argv[r + 2] + 0, argv[r + 3] + 0
    -- The buckets: cnt packed ones from bucket h on (0-based), then the one added or
    -- merged at the back (bs, bc), if any.
    local buf, h, cnt, total = '', 0, 0, 0
    if live then
      total = tonumber(v2)
      if total == nil or #v1 == 0 or #v1 % 16 ~= 0 then
        return nil, raw, sec, nsec
      end
      buf, cnt = v1, #v1 / 16
    end
    -- prune
    while cnt > 0 do
      local start, count = struct.unpack('<dd', buf, h * 16 + 1)
      if start + window > now then
        break
      end
      total, h, cnt = total - count, h + 1, cnt - 1
    end
    local want, bs, bc = max(cost, 1), nil, nil
    if total + want <= limit then
      if cost > 0 then
        -- add
        bs = fast_align(base, now, precision)
        if bs == nil then
          return nil, raw, sec, nsec
        end
        local full = cnt >= max(min(limit, window / precision), 1)
        bc = cost
        if cnt > 0 then
          local back_start, back_count = struct.unpack('<dd', buf, (h + cnt - 1) * 16 + 1)
          bs = max(bs, back_start)
          if back_start == bs or full then
            cnt, bc = cnt - 1, back_count + cost
          end
        end
        total = total + cost
      end
      rem = limit - total
    else
      ok, rem = 0, max(limit - total, 0)
    end
    -- empty_at
    if bs ~= nil then
      nx = bs + window
    elseif cnt > 0 then
      nx = struct.unpack('<dd', buf, (h + cnt - 1) * 16 + 1) + window
    end
    reset = max(nx - now, 0)
    if ok == 0 then
      local to_free, ready = total + want - limit, nx
      for k = h, h + cnt - 1 do
        local start, count = struct.unpack('<dd', buf, k * 16 + 1)
        if count >= to_free then
          ready = start + window
          break
        end
        to_free = to_free - count
      end
      retry = max(ready - now, 0)
    end
    n1 = string.sub(buf, h * 16 + 1, (h + cnt) * 16)
    if bs ~= nil then
      n1 = n1 .. struct.pack('<dd', bs, bc)
    end
    n2, units = fmt(total), total
  end
  if ok == 0 and lockout and cost > 0 then
    return nil, raw, sec, nsec -- the lockout engages: the general path blocks the key
  end

  -- S.prepare and R.write: store the record if it is live and may be stored (one SET,
  -- only if it changed; KEEPTTL when the expiry did not move), delete it if it is held
  -- and not live.
  if nx > now and (live or cost > 0) then
    if nx - now > REACH_NS or units > MAX_UNITS then
      return nil, raw, sec, nsec -- a refusal at the horizon: the general path makes it
    end
    local bt = fmt(base)
    xt = xt or fmt(nx)
    local text
    if tag == 'gc' then
      text = 'gc ' .. bt .. ' ' .. xt .. ' ' .. n1
    elseif tag == 'sl' then
      text = 'sl ' .. bt .. ' ' .. xt .. ' ' .. n2 .. ' ' .. n1
    else
      text = tag .. ' ' .. bt .. ' ' .. xt .. ' ' .. n1 .. ' ' .. n2
    end
    if text ~= raw then
      if held and ob == bt and ox == xt then
        redis.call('SET', key, text, 'KEEPTTL')
      else
        local ms, sub_ms = divmod(nx - now, 1000000) -- div_ceil
        if sub_ms > 0 then
          ms = ms + 1
        end
        -- A number argument: Redis writes an integer below 2^53 in plain digits.
        if held then
          redis.call('SET', key, text, 'PX', ms + grace_ms)
        elseif not redis.call('SET', key, text, 'PX', ms + grace_ms, 'NX') then
          return nil, nil, sec, nsec -- not absent after all: another type (read as seen)
        end
      end
    end
    return ok, rem, reset, retry, text
  elseif held then
    redis.call('DEL', key)
  elseif seen == false and redis.call('EXISTS', key) == 1 then
    return nil, nil, sec, nsec -- a peek at a key that holds another type
  end
  return ok, rem, reset, retry, false
end
