-- weighted_window.lua: the two-window weighted estimate of a sliding window.
-- Mirrors crates/weir-core/src/algorithm/weighted_window.rs step for step (same state, same
-- integers, the same bisection for retry_after); weir-testkit's conformance suite checks
-- they agree. previous * weight / window is computed exactly (N.mul_div_ceil).
-- State fields: s = current window start (offset), p = units in the window before, c =
-- units in the current one.
do
  local M = {}

  function M.params(p, a, b)
    p.limit, p.window = a, b
  end

  local function roll(p, st, now)
    local start = T.align(now, p.window)
    if st.s >= start then
      return { s = st.s, p = st.p, c = st.c }
    elseif st.s + p.window == start then
      return { s = start, p = st.c, c = 0 }
    end
    return { s = start, p = 0, c = 0 }
  end

  local function put(st, s)
    st.s, st.p, st.c = s.s, s.p, s.c
  end

  local function estimate(p, s, now)
    local elapsed = math.min(math.max(now - s.s, 0), p.window)
    return N.mul_div_ceil(s.p, p.window - elapsed, p.window) + s.c
  end

  local function admits(p, st, at, want)
    local s = roll(p, st, at)
    return estimate(p, s, at) + want <= p.limit
  end

  local function empty_at(p, s)
    if s.c > 0 then
      return s.s + 2 * p.window
    elseif s.p > 0 then
      return s.s + p.window
    end
    return PAST
  end

  function M.fresh(p, now)
    return roll(p, { s = PAST, p = 0, c = 0 }, now)
  end

  function M.check(p, st, now, cost)
    local s = roll(p, st, now)
    local want = math.max(cost, 1)
    local est = estimate(p, s, now)
    if est + want <= p.limit then
      if cost > 0 then
        s.c = s.c + cost
        put(st, s)
      end
      return allow(p.limit - (est + cost), N.till(empty_at(p, s), now))
    end
    -- The estimate never rises as time passes, and within 2 windows it is zero.
    local lo, hi = now, now + 2 * p.window
    while lo + 1 < hi do
      local mid = lo + math.floor((hi - lo) / 2)
      if admits(p, s, mid, want) then
        hi = mid
      else
        lo = mid
      end
    end
    return deny(math.max(p.limit - est, 0), N.till(empty_at(p, s), now), N.till(hi, now))
  end

  function M.penalize(p, st, now, n)
    local s = roll(p, st, now)
    s.c = s.c + n
    put(st, s)
  end

  function M.reward(p, st, now, n)
    local s = roll(p, st, now)
    local from_current = math.min(s.c, n)
    s.c = s.c - from_current
    s.p = math.max(s.p - (n - from_current), 0)
    put(st, s)
  end

  function M.used(p, st, now)
    return estimate(p, roll(p, st, now), now)
  end

  function M.fresh_at(p, st)
    return empty_at(p, st)
  end

  -- The fields as they follow the record's head (record.lua): ' <s> <p> <c>'.
  function M.decode(body, shift)
    local ss, ps, cs = string.match(body, '^ (%-?%d+) (%-?%d+) (%-?%d+)$')
    local s, prev, c = instant(ss, shift), tonumber(ps), tonumber(cs)
    if s == nil or prev == nil or c == nil then
      fail('corrupt', 'weighted window state')
    end
    return { s = s, p = prev, c = c }
  end

  function M.encode(st)
    if st.p > MAX_UNITS or st.c > MAX_UNITS then
      fail('horizon', 'count')
    end
    return ' ' .. fmt(st.s) .. ' ' .. fmt(st.p) .. ' ' .. fmt(st.c)
  end

  PARAMS.ww, ALG.ww = M.params, M
end
