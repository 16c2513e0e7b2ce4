-- token_bucket.lua: the token bucket (capacity, one token per interval, initial tokens).
-- Mirrors crates/weir-core/src/algorithm/token_bucket.rs step for step (same state, same
-- integers); weir-testkit's conformance suite checks they agree, on both paths.
-- State fields: t = whole tokens at l, l = when the last whole token was added (offset;
-- in the future after a penalty beyond zero tokens).
-- Two parts (src/scripts.rs places them): the step over plain numbers, which the fast
-- path (fast.lua) and the general path share, then the general path's module.
local TB = {}

function TB.params(p, a, b, c)
  p.capacity, p.interval, p.initial = a, b, c
end

-- Tokens and refill instant at now.
function TB.refill(p, t, l, now)
  local capacity = p.capacity
  local tokens, last = math.min(t, capacity), l
  if now > last then
    local added = divmod(now - last, p.interval)
    tokens = math.min(tokens + added, capacity)
    if tokens == capacity then
      last = now
    else
      last = last + added * p.interval
    end
  end
  return tokens, last
end

local function full_at(p, tokens, last)
  return last + math.max(p.capacity - tokens, 0) * p.interval
end

-- The check at now on (t, l): allowed (boolean), remaining, reset, retry, and (t, l) after it.
function TB.check(p, t, l, now, cost)
  local max = math.max
  local tokens, last = TB.refill(p, t, l, now)
  local want = max(cost, 1)
  if tokens >= want then
    if cost > 0 then
      tokens = tokens - cost
      t, l = tokens, last
    end
    return true, tokens, max(full_at(p, tokens, last) - now, 0), 0, t, l
  end
  local ready = last + (want - tokens) * p.interval
  return false, tokens, max(full_at(p, tokens, last) - now, 0), max(ready - now, 0), t, l
end

function TB.fresh_at(p, t, l)
  local full = full_at(p, math.min(t, p.capacity), l)
  if p.initial < p.capacity then
    -- A full bucket is more than a fresh one here: kept one more refill period.
    return full + p.capacity * p.interval
  end
  return full
end

-- The fast path's adapter (fast.lua): the record's fields as matched by `shape` (live or
-- not), the check, then the new expiry, the fields as text and the count to bound.
TB.shape = '^tb (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+)$'

function TB.fast(p, live, v1, v2, _, now, _, cost)
  local t, l = p.initial, now
  if live then
    t, l = tonumber(v1), tonumber(v2)
    if t == nil or l == nil then
      return nil
    end
  end
  local ok, rem, reset, retry
  ok, rem, reset, retry, t, l = TB.check(p, t, l, now, cost)
  return ok, rem, reset, retry, TB.fresh_at(p, t, l), ' ' .. fmt(t) .. ' ' .. fmt(l), 0
end

PARAMS.tb, FASTS.tb = TB.params, TB

-- @general
do
  local M = {}

  function M.fresh(p, now)
    return { t = p.initial, l = now }
  end

  function M.check(p, st, now, cost)
    local ok, rem, reset, retry, t, l = TB.check(p, st.t, st.l, now, cost)
    st.t, st.l = t, l
    return decision(ok, rem, reset, retry)
  end

  function M.penalize(p, st, now, n)
    local tokens, last = TB.refill(p, st.t, st.l, now)
    if n <= tokens then
      tokens = tokens - n
    else
      local debt = n - tokens
      tokens = 0
      last = last + debt * p.interval
    end
    st.t, st.l = tokens, last
  end

  function M.reward(p, st, now, n)
    local tokens, last = TB.refill(p, st.t, st.l, now)
    if last > now then
      local debt = N.div_ceil(last - now, p.interval)
      local paid = math.min(debt, n)
      last = math.max(last - paid * p.interval, now)
      n = n - paid
    end
    tokens = math.min(tokens + n, p.capacity)
    if tokens == p.capacity then
      last = math.max(last, now)
    end
    st.t, st.l = tokens, last
  end

  function M.used(p, st, now)
    local tokens, last = TB.refill(p, st.t, st.l, now)
    local debt = N.div_ceil(math.max(last - now, 0), p.interval)
    return (p.capacity - tokens) + debt
  end

  function M.fresh_at(p, st)
    return TB.fresh_at(p, st.t, st.l)
  end

  -- For a warm-up (warmup.lua; `Ramped` in token_bucket.rs): when the bucket is full, and
  -- `ns` more of debt: whole tokens taken, the part of the last one not owed given back as
  -- refill progress.
  function M.full_at(p, st)
    return full_at(p, math.min(st.t, p.capacity), st.l)
  end

  function M.charge(p, st, now, ns)
    local tokens = N.div_ceil(ns, p.interval)
    M.penalize(p, st, now, tokens)
    st.l = st.l - (tokens * p.interval - ns)
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
