-- gcra.lua: GCRA, the leaky bucket meter kept as one theoretical arrival time.
-- Mirrors crates/weir-core/src/algorithm/gcra.rs step for step (same state, same
-- integers); weir-testkit's conformance suite checks they agree.
-- State field: t = the theoretical arrival time (offset; PAST for a fresh key).
do
  local M = {}

  function M.params(p, a, b, c)
    p.burst, p.interval, p.tolerance = a, b, c
  end

  local function remaining(p, tat, now)
    return N.divmod(math.max(p.tolerance - math.max(tat - now, 0), 0), p.interval)
  end

  function M.fresh()
    return { t = PAST }
  end

  function M.check(p, st, now, cost)
    local tat = math.max(st.t, now)
    local new_tat = tat + math.max(cost, 1) * p.interval
    if new_tat - now <= p.tolerance then
      if cost == 0 then
        return allow(remaining(p, tat, now), N.till(tat, now))
      end
      st.t = new_tat
      return allow(remaining(p, new_tat, now), N.till(new_tat, now))
    end
    return deny(remaining(p, tat, now), N.till(tat, now), N.till(new_tat - p.tolerance, now))
  end

  function M.penalize(p, st, now, n)
    st.t = math.max(st.t, now) + n * p.interval
  end

  function M.reward(p, st, now, n)
    st.t = math.max(st.t - n * p.interval, math.min(now, st.t))
  end

  function M.used(p, st, now)
    return N.div_ceil(math.max(st.t - now, 0), p.interval)
  end

  function M.fresh_at(p, st)
    return st.t
  end

  -- The fields as they follow the record's head (record.lua): ' <t>'.
  function M.decode(body, shift)
    local t = instant(string.match(body, '^ (%-?%d+)$'), shift)
    if t == nil then
      fail('corrupt', 'gcra state')
    end
    return { t = t }
  end

  function M.encode(st)
    return ' ' .. fmt(st.t)
  end

  ALG.gc = M
end
