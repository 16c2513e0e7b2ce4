-- fast.lua: the fast path of the plain check. One operation `c` (a check, or a peek at
-- cost 0) on a key whose record is absent, or holds this algorithm's state and nothing
-- else (no block, no lockout strikes, no rebase due), under GCRA, the token bucket, the
-- fixed window or the sliding log / window counter. It computes exactly what the general
-- path would (R.load, S.apply, S.prepare and R.write in record.lua and step.lua, then the
-- algorithm's `check` and `fresh_at` in its own file; each step below names its
-- original), straight-line: no tables but the reply, no closures, no dispatch.
-- Anything else (another operation, a record with a guard, another algorithm's record or
-- a corrupt one, a rebase, a window whose epoch phase needs long multiplication, a
-- lockout that engages, a refusal at the horizon) makes it give up before writing
-- anything: FAST returns nil and the HGETALL it read (if any), and the general path
-- starts over from that. It is defined before the general path, so a single script
-- (single_fast.lua) whose call it answers never runs the rest of the chunk.
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

-- The plain check of `argv[i..]` (S.one's layout) on `key` at (sec, nsec): the reply of
-- S.reply, or nil and the key's HGETALL when the general path must decide.
local function FAST(key, sec, nsec, grace_ms, argv, i)
  -- The state fields of the algorithm (see its file).
  local tag, f1, f2 = argv[i + 3], nil, nil
  if tag == 'gc' then
    f1 = 't'
  elseif tag == 'tb' then
    f1, f2 = 't', 'l'
  elseif tag == 'fw' then
    f1, f2 = 's', 'c'
  elseif tag == 'sl' then
    f1, f2 = 'e', 'n'
  else
    return nil
  end
  if argv[i] ~= 'c' then
    return nil
  end
  local cost = tonumber(argv[i + 1]) or 0
  local lockout = argv[i + 7] ~= ''

  -- R.load: the record, or none.
  local raw = redis.pcall('HGETALL', key)
  if raw.err then
    return nil, raw
  end
  local held, live, base, now, x = false, false, sec, nsec, PAST
  local ob, ox, v1, v2 -- the stored texts of b, x and the state fields
  if #raw > 0 then
    local oa
    for j = 1, #raw, 2 do
      local name, value = raw[j], raw[j + 1]
      if name == 'b' then
        ob = value
      elseif name == 'x' then
        ox = value
      elseif name == 'a' then
        oa = value
      elseif name == f1 then
        v1 = value
      elseif name == f2 then
        v2 = value
      else
        return nil, raw -- a guard, another algorithm's fields, or a stranger's
      end
    end
    base, x = tonumber(ob), tonumber(ox)
    if oa ~= tag or base == nil or x == nil then
      return nil, raw
    end
    now = (sec - base) * SEC_NS + nsec
    if now > REBASE_NS or now < -REBASE_NS then
      return nil, raw
    end
    -- Held means held and live: an expired record is no record (`step::keep`).
    held, live = true, x > now
  end

  -- The algorithm's `check` on its state (decoded when live, fresh otherwise), then
  -- `fresh_at`: the decision, the new expiry nx, and the state as field texts.
  local ok, rem, reset, retry = 1, 0, 0, 0
  local nx, n1, n2, units = PAST, nil, nil, 0
  if tag == 'gc' then
    local interval, tolerance = tonumber(argv[i + 5]), tonumber(argv[i + 6])
    local t = PAST
    if live then
      t = tonumber(v1)
      if t == nil then
        return nil, raw
      end
    end
    local tat = math.max(t, now)
    local new_tat = tat + math.max(cost, 1) * interval
    local at = tat
    if new_tat - now <= tolerance then
      if cost ~= 0 then
        t, at = new_tat, new_tat
      end
    else
      ok, retry = 0, till(new_tat - tolerance, now)
    end
    rem = divmod(math.max(tolerance - math.max(at - now, 0), 0), interval)
    reset = till(at, now)
    nx, n1 = t, fmt(t)
  elseif tag == 'tb' then
    local capacity, interval, initial =
      tonumber(argv[i + 4]), tonumber(argv[i + 5]), tonumber(argv[i + 6])
    local t, l = initial, now
    if live then
      t, l = tonumber(v1), tonumber(v2)
      if t == nil or l == nil then
        return nil, raw
      end
    end
    -- refill
    local tokens, last = math.min(t, capacity), l
    if now > last then
      local added = divmod(now - last, interval)
      tokens = math.min(tokens + added, capacity)
      if tokens == capacity then
        last = now
      else
        last = last + added * interval
      end
    end
    local want = math.max(cost, 1)
    if tokens >= want then
      if cost > 0 then
        tokens = tokens - cost
        t, l = tokens, last
      end
    else
      ok, retry = 0, till(last + (want - tokens) * interval, now)
    end
    rem, reset = tokens, till(last + math.max(capacity - tokens, 0) * interval, now)
    nx = l + math.max(capacity - math.min(t, capacity), 0) * interval
    if initial < capacity then
      nx = nx + capacity * interval
    end
    n1, n2 = fmt(t), fmt(l)
  elseif tag == 'fw' then
    local limit, window = tonumber(argv[i + 4]), tonumber(argv[i + 5])
    local start = fast_align(base, now, window)
    if start == nil then
      return nil, raw
    end
    local s, c = start, 0
    if live then
      s, c = tonumber(v1), tonumber(v2)
      if s == nil or c == nil then
        return nil, raw
      end
    end
    -- current: the same window, or a lagging clock counting into the newer one
    local cs, cc = start, 0
    if s >= start then
      cs, cc = s, c
    end
    reset = till(cs + window, now)
    if cc + math.max(cost, 1) <= limit then
      if cost > 0 then
        cc = cc + cost
        s, c = cs, cc
      end
      rem = limit - cc
    else
      ok, rem, retry = 0, math.max(limit - cc, 0), reset
    end
    if c ~= 0 then
      nx = s + window
    end
    n1, n2, units = fmt(s), fmt(c), c
  else
    local limit, window, precision =
      tonumber(argv[i + 4]), tonumber(argv[i + 5]), tonumber(argv[i + 6])
    -- The buckets: cnt packed ones from bucket h on (0-based), then the one added or
    -- merged at the back (bs, bc), if any.
    local buf, h, cnt, total = '', 0, 0, 0
    if live and v1 ~= nil then
      total = tonumber(v2)
      if total == nil or #v1 % 16 ~= 0 then
        return nil, raw
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
    local want, bs, bc = math.max(cost, 1), nil, nil
    if total + want <= limit then
      if cost > 0 then
        -- add
        bs = fast_align(base, now, precision)
        if bs == nil then
          return nil, raw
        end
        local full = cnt >= math.max(math.min(limit, window / precision), 1)
        bc = cost
        if cnt > 0 then
          local back_start, back_count = struct.unpack('<dd', buf, (h + cnt - 1) * 16 + 1)
          bs = math.max(bs, back_start)
          if back_start == bs or full then
            cnt, bc = cnt - 1, back_count + cost
          end
        end
        total = total + cost
      end
      rem = limit - total
    else
      ok, rem = 0, math.max(limit - total, 0)
    end
    -- empty_at
    if bs ~= nil then
      nx = bs + window
    elseif cnt > 0 then
      nx = struct.unpack('<dd', buf, (h + cnt - 1) * 16 + 1) + window
    end
    reset = till(nx, now)
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
      retry = till(ready, now)
    end
    n1 = string.sub(buf, h * 16 + 1, (h + cnt) * 16)
    if bs ~= nil then
      n1 = n1 .. struct.pack('<dd', bs, bc)
    end
    n2, units = fmt(total), total
  end
  if ok == 0 and lockout and cost > 0 then
    return nil, raw -- the lockout engages: the general path blocks the key
  end

  -- S.prepare and R.write: store the record if it is live and may be stored (only what
  -- changed, the TTL only when the expiry moves), delete it if it is held and not live.
  if nx > now and (live or cost > 0) then
    if nx - now > REACH_NS or units > MAX_UNITS then
      return nil, raw -- a refusal at the horizon: the general path makes it
    end
    local bt, xt = fmt(base), fmt(nx)
    if not held then
      if f2 == nil then
        redis.call('HSET', key, 'b', bt, 'x', xt, 'a', tag, f1, n1)
      else
        redis.call('HSET', key, 'b', bt, 'x', xt, 'a', tag, f1, n1, f2, n2)
      end
    else
      local changed, n = {}, 0
      if ob ~= bt then
        changed[n + 1], changed[n + 2], n = 'b', bt, n + 2
      end
      if ox ~= xt then
        changed[n + 1], changed[n + 2], n = 'x', xt, n + 2
      end
      if v1 ~= n1 then
        changed[n + 1], changed[n + 2], n = f1, n1, n + 2
      end
      if f2 ~= nil and v2 ~= n2 then
        changed[n + 1], changed[n + 2], n = f2, n2, n + 2
      end
      if n > 0 then
        redis.call('HSET', key, unpack(changed, 1, n))
      end
    end
    if not held or ob ~= bt or ox ~= xt then
      redis.call('PEXPIRE', key, fmt(div_ceil(nx - now, 1000000) + grace_ms))
    end
  elseif held then
    redis.call('DEL', key)
  end
  return { 1, ok, rem, reset, retry, 0 }
end
