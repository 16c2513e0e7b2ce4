-- fixed_window.lua: the fixed window counter, aligned to the Unix epoch.
-- Mirrors crates/weir-core/src/algorithm/fixed_window.rs step for step (same state, same
-- integers); weir-testkit's conformance suite checks they agree.
-- State fields: s = window start (offset), c = units used in it.
do
  local M = {}

  function M.params(p, a, b)
    p.limit, p.window = a, b
  end

  local function current(p, st, now)
    local start = T.align(now, p.window)
    if st.s >= start then
      -- Same window, or a lagging clock: count into the newer window.
      return { s = st.s, c = st.c }
    end
    return { s = start, c = 0 }
  end

  local function put(st, s)
    st.s, st.c = s.s, s.c
  end

  function M.fresh(p, now)
    return current(p, { s = PAST, c = 0 }, now)
  end

  function M.check(p, st, now, cost)
    local s = current(p, st, now)
    local e = N.till(s.s + p.window, now)
    if s.c + math.max(cost, 1) <= p.limit then
      if cost > 0 then
        s.c = s.c + cost
        put(st, s)
      end
      return allow(p.limit - s.c, e)
    end
    return deny(math.max(p.limit - s.c, 0), e, e)
  end

  function M.penalize(p, st, now, n)
    local s = current(p, st, now)
    s.c = s.c + n
    put(st, s)
  end

  function M.reward(p, st, now, n)
    local s = current(p, st, now)
    s.c = math.max(s.c - n, 0)
    put(st, s)
  end

  function M.used(p, st, now)
    return current(p, st, now).c
  end

  function M.fresh_at(p, st)
    if st.c == 0 then
      return PAST
    end
    return st.s + p.window
  end

  -- The fields as they follow the record's head (record.lua): ' <s> <c>'.
  function M.decode(body, shift)
    local ss, cs = string.match(body, '^ (%-?%d+) (%-?%d+)$')
    local s, c = instant(ss, shift), tonumber(cs)
    if s == nil or c == nil then
      fail('corrupt', 'fixed window state')
    end
    return { s = s, c = c }
  end

  function M.encode(st)
    if st.c > MAX_UNITS then
      fail('horizon', 'count')
    end
    return ' ' .. fmt(st.s) .. ' ' .. fmt(st.c)
  end

  ALG.fw = M
end
