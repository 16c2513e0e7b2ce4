-- gcra.lua: GCRA, the leaky bucket meter kept as one theoretical arrival time.
-- Mirrors crates/weir-core/src/algorithm/gcra.rs step for step (same state, same
-- integers); weir-testkit's conformance suite checks they agree, on both paths.
-- State field: t = the theoretical arrival time (offset; PAST for a fresh key).
-- Two parts (src/scripts.rs places them): the step over plain numbers, which the fast
-- path (fast.lua) and the general path share, then the general path's module.
local GC = {}

function GC.params(p, a, b, c)
  p.burst, p.interval, p.tolerance = a, b, c
end

-- The check at now on the arrival time t: allowed (boolean), remaining, reset, retry, and
-- the arrival time after it.
function GC.check(p, t, now, cost)
  local max, interval, tolerance = math.max, p.interval, p.tolerance
  local tat = max(t, now)
  local new_tat = tat + max(cost, 1) * interval
  local at, ok, retry = tat, true, 0
  if new_tat - now <= tolerance then
    if cost ~= 0 then
      t, at = new_tat, new_tat
    end
  else
    ok, retry = false, max(new_tat - tolerance - now, 0)
  end
  local remaining = divmod(max(tolerance - max(at - now, 0), 0), interval)
  return ok, remaining, max(at - now, 0), retry, t
end

-- The fast path's adapter (fast.lua): the record's fields as matched by `shape` (live or
-- not), the check, then the new expiry, the fields as text and the count to bound.
GC.shape = '^gc (%-?%d+) (%-?%d+) (%-?%d+)$'

function GC.fast(p, live, v1, _, _, now, _, cost)
  local t = PAST
  if live then
    t = tonumber(v1)
    if t == nil then
      return nil
    end
  end
  local ok, rem, reset, retry
  ok, rem, reset, retry, t = GC.check(p, t, now, cost)
  local text = fmt(t)
  -- The expiry is t: its text too.
  return ok, rem, reset, retry, t, ' ' .. text, 0, text
end

PARAMS.gc, FASTS.gc = GC.params, GC

-- @general
do
  local M = {}

  function M.fresh()
    return { t = PAST }
  end

  function M.check(p, st, now, cost)
    local ok, rem, reset, retry, t = GC.check(p, st.t, now, cost)
    st.t = t
    return decision(ok, rem, reset, retry)
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

  -- For a warm-up (warmup.lua; `Ramped` in gcra.rs): when the key owes nothing, and `ns`
  -- more of debt.
  function M.full_at(p, st)
    return st.t
  end

  function M.charge(p, st, now, ns)
    st.t = math.max(st.t, now) + ns
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
