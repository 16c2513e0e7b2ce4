-- leaky_queue.lua: the leaky bucket as a queue (shaping: allowed requests get a delay).
-- Mirrors crates/weir-core/src/algorithm/leaky_queue.rs step for step (same state, same
-- integers); weir-testkit's conformance suite checks they agree.
-- State field: n = when the next unit may leave (offset; PAST for a fresh key).
do
  local M = {}

  -- max_wait may be 2^64 - 1 (no bound): as a double it only ever loses comparisons.
  function M.params(p, a, b, c)
    p.interval, p.max_depth, p.max_wait = a, b, c
  end

  local function queued(p, next_free, now)
    return N.div_ceil(math.max(next_free - now, 0), p.interval)
  end

  function M.fresh()
    return { n = PAST }
  end

  function M.check(p, st, now, cost)
    local want = math.max(cost, 1)
    local start = math.max(st.n, now)
    local wait = start - now
    local ahead = queued(p, start, now)
    if ahead + want <= p.max_depth and wait <= p.max_wait then
      local next_free = start + want * p.interval
      if cost > 0 then
        st.n = next_free
      end
      local after = start
      if cost > 0 then
        after = next_free
      end
      local d = allow(math.max(p.max_depth - queued(p, after, now), 0), N.till(after, now))
      d.delay = wait
      return d
    end
    local depth_ok = start - (p.max_depth - want) * p.interval
    local wait_ok = start - p.max_wait
    return deny(
      math.max(p.max_depth - ahead, 0),
      N.till(start, now),
      N.till(math.max(depth_ok, wait_ok), now)
    )
  end

  function M.penalize(p, st, now, n)
    st.n = math.max(st.n, now) + n * p.interval
  end

  function M.reward(p, st, now, n)
    if st.n > now then
      st.n = math.max(st.n - n * p.interval, now)
    end
  end

  function M.used(p, st, now)
    return queued(p, st.n, now)
  end

  function M.fresh_at(p, st)
    return st.n
  end

  -- The fields as they follow the record's head (record.lua): ' <n>'.
  function M.decode(body, shift)
    local n = instant(string.match(body, '^ (%-?%d+)$'), shift)
    if n == nil then
      fail('corrupt', 'leaky queue state')
    end
    return { n = n }
  end

  function M.encode(st)
    return ' ' .. fmt(st.n)
  end

  PARAMS.lq, ALG.lq = M.params, M
end
