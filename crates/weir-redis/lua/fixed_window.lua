-- fixed_window.lua: the fixed window counter, aligned to the Unix epoch.
-- Mirrors crates/weir-core/src/algorithm/fixed_window.rs step for step (same state, same
-- integers); weir-testkit's conformance suite checks they agree, on both paths.
-- State fields: s = window start (offset), c = units used in it.
-- Two parts (src/scripts.rs places them): the step over plain numbers, which the fast
-- path (fast.lua) and the general path share, then the general path's module. The
-- window's start at now (`start`, epoch-aligned) is the caller's: the fast path aligns
-- without long multiplication, the general path with it (T.align).
local FW = {}

function FW.params(p, a, b)
  p.limit, p.window = a, b
end

-- The window counted into at now: the same one, or a lagging clock counting into the
-- newer one.
function FW.current(s, c, start)
  if s >= start then
    return s, c
  end
  return start, 0
end

-- The check at now on (s, c): allowed (boolean), remaining, reset, retry, and (s, c) after it.
function FW.check(p, s, c, start, now, cost)
  local cs, cc = FW.current(s, c, start)
  local reset = math.max(cs + p.window - now, 0)
  if cc + math.max(cost, 1) <= p.limit then
    if cost > 0 then
      cc = cc + cost
      s, c = cs, cc
    end
    return true, p.limit - cc, reset, 0, s, c
  end
  return false, math.max(p.limit - cc, 0), reset, reset, s, c
end

function FW.fresh_at(p, s, c)
  if c == 0 then
    return PAST
  end
  return s + p.window
end

-- The fast path's adapter (fast.lua): the record's fields as matched by `shape` (live or
-- not), the check, then the new expiry, the fields as text and the count to bound.
FW.shape = '^fw (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+)$'

function FW.fast(p, live, v1, v2, _, now, base, cost)
  local start = fast_align(base, now, p.window)
  if start == nil then
    return nil
  end
  local s, c = start, 0
  if live then
    s, c = tonumber(v1), tonumber(v2)
    if s == nil or c == nil then
      return nil
    end
  end
  local ok, rem, reset, retry
  ok, rem, reset, retry, s, c = FW.check(p, s, c, start, now, cost)
  return ok, rem, reset, retry, FW.fresh_at(p, s, c), ' ' .. fmt(s) .. ' ' .. fmt(c), c
end

PARAMS.fw, FASTS.fw = FW.params, FW

-- @general
do
  local M = {}

  local function current(p, st, now)
    return FW.current(st.s, st.c, T.align(now, p.window))
  end

  function M.fresh(p, now)
    local s, c = current(p, { s = PAST, c = 0 }, now)
    return { s = s, c = c }
  end

  function M.check(p, st, now, cost)
    local ok, rem, reset, retry, s, c =
      FW.check(p, st.s, st.c, T.align(now, p.window), now, cost)
    st.s, st.c = s, c
    return decision(ok, rem, reset, retry)
  end

  function M.penalize(p, st, now, n)
    local s, c = current(p, st, now)
    st.s, st.c = s, c + n
  end

  function M.reward(p, st, now, n)
    local s, c = current(p, st, now)
    st.s, st.c = s, math.max(c - n, 0)
  end

  function M.used(p, st, now)
    local _, c = current(p, st, now)
    return c
  end

  function M.fresh_at(p, st)
    return FW.fresh_at(p, st.s, st.c)
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
