-- token_bucket.lua: the token bucket (capacity, one token per interval, initial tokens).
-- Mirrors crates/weir-core/src/algorithm/token_bucket.rs step for step (same state, same
-- integers); weir-testkit's conformance suite checks they agree.
-- State fields: t = whole tokens at l, l = when the last whole token was added (offset;
-- in the future after a penalty beyond zero tokens).
do
  local M = {}

  function M.params(p, a, b, c)
    p.capacity, p.interval, p.initial = a, b, c
  end

  -- Tokens and refill instant at now.
  local function refill(p, st, now)
    local tokens = math.min(st.t, p.capacity)
    local last = st.l
    if now > last then
      local added = N.divmod(now - last, p.interval)
      tokens = math.min(tokens + added, p.capacity)
      if tokens == p.capacity then
        last = now
      else
        last = last + added * p.interval
      end
    end
    return { t = tokens, l = last }
  end

  local function full_at(p, s)
    return s.l + math.max(p.capacity - s.t, 0) * p.interval
  end

  local function put(st, s)
    st.t, st.l = s.t, s.l
  end

  function M.fresh(p, now)
    return { t = p.initial, l = now }
  end

  function M.check(p, st, now, cost)
    local s = refill(p, st, now)
    local want = math.max(cost, 1)
    if s.t >= want then
      if cost > 0 then
        s.t = s.t - cost
        put(st, s)
      end
      return allow(s.t, N.till(full_at(p, s), now))
    end
    local ready = s.l + (want - s.t) * p.interval
    return deny(s.t, N.till(full_at(p, s), now), N.till(ready, now))
  end

  function M.penalize(p, st, now, n)
    local s = refill(p, st, now)
    if n <= s.t then
      s.t = s.t - n
    else
      local debt = n - s.t
      s.t = 0
      s.l = s.l + debt * p.interval
    end
    put(st, s)
  end

  function M.reward(p, st, now, n)
    local s = refill(p, st, now)
    if s.l > now then
      local debt = N.div_ceil(s.l - now, p.interval)
      local paid = math.min(debt, n)
      s.l = math.max(s.l - paid * p.interval, now)
      n = n - paid
    end
    s.t = math.min(s.t + n, p.capacity)
    if s.t == p.capacity then
      s.l = math.max(s.l, now)
    end
    put(st, s)
  end

  function M.used(p, st, now)
    local s = refill(p, st, now)
    local debt = N.div_ceil(math.max(s.l - now, 0), p.interval)
    return (p.capacity - s.t) + debt
  end

  function M.fresh_at(p, st)
    local full = full_at(p, { t = math.min(st.t, p.capacity), l = st.l })
    if p.initial < p.capacity then
      -- A full bucket is more than a fresh one here: kept one more refill period.
      return full + p.capacity * p.interval
    end
    return full
  end

  -- The fields as they follow the record's head (record.lua): ' <t> <l>'.
  function M.decode(body, shift)
    local ts, ls = string.match(body, '^ (%-?%d+) (%-?%d+)$')
    local t, l = tonumber(ts), instant(ls, shift)
    if t == nil or l == nil then
      fail('corrupt', 'token bucket state')
    end
    return { t = t, l = l }
  end

  function M.encode(st)
    return ' ' .. fmt(st.t) .. ' ' .. fmt(st.l)
  end

  ALG.tb = M
end
