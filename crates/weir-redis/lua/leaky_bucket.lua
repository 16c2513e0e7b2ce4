-- leaky_bucket.lua: the leaky bucket as a meter (capacity, drains one unit per interval).
-- Mirrors crates/weir-core/src/algorithm/leaky_bucket.rs step for step (same state, same
-- integers); weir-testkit's conformance suite checks they agree.
-- State fields: v = level at l, l = when the last whole unit drained (offset).
do
  local M = {}

  function M.params(p, a, b)
    p.capacity, p.interval = a, b
  end

  local function drain(p, st, now)
    local s = { v = st.v, l = st.l }
    if now > s.l then
      local drained = N.divmod(now - s.l, p.interval)
      if drained >= s.v then
        s.v = 0
        s.l = now
      else
        s.v = s.v - drained
        s.l = s.l + drained * p.interval
      end
    end
    return s
  end

  local function empty_at(p, s)
    return s.l + s.v * p.interval
  end

  local function put(st, s)
    st.v, st.l = s.v, s.l
  end

  function M.fresh(p, now)
    return { v = 0, l = now }
  end

  function M.check(p, st, now, cost)
    local s = drain(p, st, now)
    local want = math.max(cost, 1)
    local room = math.max(p.capacity - s.v, 0)
    if want <= room then
      if cost > 0 then
        s.v = s.v + cost
        put(st, s)
      end
      return allow(p.capacity - s.v, N.till(empty_at(p, s), now))
    end
    local excess = s.v + want - p.capacity
    return deny(room, N.till(empty_at(p, s), now), N.till(s.l + excess * p.interval, now))
  end

  function M.penalize(p, st, now, n)
    local s = drain(p, st, now)
    s.v = s.v + n
    put(st, s)
  end

  function M.reward(p, st, now, n)
    local s = drain(p, st, now)
    s.v = math.max(s.v - n, 0)
    if s.v == 0 then
      s.l = math.max(s.l, now)
    end
    put(st, s)
  end

  function M.used(p, st, now)
    return drain(p, st, now).v
  end

  function M.fresh_at(p, st)
    return empty_at(p, st)
  end

  -- The fields as they follow the record's head (record.lua): ' <v> <l>'.
  function M.decode(body, shift)
    local vs, ls = string.match(body, '^ (%-?%d+) (%-?%d+)$')
    local v, l = tonumber(vs), instant(ls, shift)
    if v == nil or l == nil then
      fail('corrupt', 'leaky bucket state')
    end
    return { v = v, l = l }
  end

  function M.encode(st)
    if st.v > MAX_UNITS then
      fail('horizon', 'level')
    end
    return ' ' .. fmt(st.v) .. ' ' .. fmt(st.l)
  end

  PARAMS.lb, ALG.lb = M.params, M
end
