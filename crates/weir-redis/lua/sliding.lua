-- sliding.lua: the sliding window log (precision 1 ns) and the sliding window counter.
-- Mirrors crates/weir-core/src/algorithm/sliding.rs step for step (same buckets, same
-- integers); weir-testkit's conformance suite checks they agree, on both paths.
-- State fields: e = the non-empty buckets, oldest first, packed as little-endian doubles
-- (start offset, count), 16 bytes each; n = their total. Stored as n then e (e last, raw
-- bytes); both absent when there are none.
-- A call decodes only the buckets it touches (pruned at the front, merged or taken at the
-- back), so a log of 10 000 entries costs what a short one does, plus copying bytes.
-- Two parts (src/scripts.rs places them): the step over the buckets, which the fast path
-- (fast.lua) and the general path share, then the general path's module. The bucket's
-- start at now (`start`, epoch-aligned to the precision) is the caller's: the fast path
-- aligns without long multiplication, the general path with it (T.align).
local SL = {}
local WIDTH = 16

function SL.params(p, a, b, c)
  p.limit, p.window, p.precision = a, b, c
end

-- The deque: `buf` holds `cnt` packed buckets from bucket `head` on (1-based; bucket 1
-- starts after `off` bytes, so that the record's own string can serve without a copy),
-- then `extra` holds buckets decoded or added during this call ({start, count} pairs, flat).
function SL.fresh()
  return { buf = '', off = 0, head = 1, cnt = 0, extra = {}, total = 0 }
end

-- The number of buckets (written out in the step's own loops: a call costs more).
function SL.len(st)
  return st.cnt + #st.extra / 2
end

-- Bucket i (1-based, oldest first): start, count.
function SL.get(st, i)
  if i <= st.cnt then
    local start, count = struct.unpack('<dd', st.buf, st.off + (st.head + i - 2) * WIDTH + 1)
    return start, count
  end
  local j = (i - st.cnt) * 2
  return st.extra[j - 1], st.extra[j]
end

local function pop_front(st)
  if st.cnt > 0 then
    st.head, st.cnt = st.head + 1, st.cnt - 1
  else
    table.remove(st.extra, 1)
    table.remove(st.extra, 1)
  end
end

-- Removes the newest bucket and returns it.
function SL.pop_back(st)
  local n = #st.extra
  if n > 0 then
    local start, count = st.extra[n - 1], st.extra[n]
    st.extra[n], st.extra[n - 1] = nil, nil
    return start, count
  end
  local start, count = SL.get(st, st.cnt)
  st.cnt = st.cnt - 1
  return start, count
end

function SL.push_back(st, start, count)
  local n = #st.extra
  st.extra[n + 1], st.extra[n + 2] = start, count
end

-- Drops the buckets that no longer count at now.
function SL.prune(p, st, now)
  while (st.cnt + #st.extra / 2) > 0 do
    local start, count = SL.get(st, 1)
    if start + p.window > now then
      break
    end
    st.total = st.total - count
    pop_front(st)
  end
end

-- Adds n units at now, whose bucket starts at `start`.
function SL.add(p, st, n, start)
  local len = (st.cnt + #st.extra / 2)
  local full = len >= math.max(math.min(p.limit, p.window / p.precision), 1)
  if len > 0 then
    local back_start, back_count = SL.get(st, len)
    -- A lagging clock counts into the newest bucket, never an older one.
    start = math.max(start, back_start)
    if back_start == start or full then
      -- pop_back, without decoding the bucket again
      local k = #st.extra
      if k > 0 then
        st.extra[k], st.extra[k - 1] = nil, nil
      else
        st.cnt = st.cnt - 1
      end
      SL.push_back(st, start, back_count + n)
      st.total = st.total + n
      return
    end
  end
  SL.push_back(st, start, n)
  st.total = st.total + n
end

function SL.empty_at(p, st)
  local len = (st.cnt + #st.extra / 2)
  if len > 0 then
    local start = SL.get(st, len)
    return start + p.window
  end
  return PAST
end

-- The check at now: allowed (boolean), remaining, reset, retry; st is updated in place.
function SL.check(p, st, now, cost, start)
  SL.prune(p, st, now)
  local want = math.max(cost, 1)
  if st.total + want <= p.limit then
    if cost > 0 then
      SL.add(p, st, cost, start)
    end
    return true, p.limit - st.total, math.max(SL.empty_at(p, st) - now, 0), 0
  end
  local to_free = st.total + want - p.limit
  local empty = SL.empty_at(p, st)
  local retry = empty
  for i = 1, (st.cnt + #st.extra / 2) do
    local start_i, count = SL.get(st, i)
    if count >= to_free then
      retry = start_i + p.window
      break
    end
    to_free = to_free - count
  end
  return false, math.max(p.limit - st.total, 0), math.max(empty - now, 0), math.max(retry - now, 0)
end

-- The buckets as the record's fields: ' <n> <e>', nothing when there are none.
function SL.fields(st)
  if (st.cnt + #st.extra / 2) == 0 then
    return ''
  end
  local from = st.off + (st.head - 1) * WIDTH
  local packed = string.sub(st.buf, from + 1, from + st.cnt * WIDTH)
  local extra = st.extra
  if #extra == 2 then
    packed = packed .. struct.pack('<dd', extra[1], extra[2])
  elseif #extra > 0 then
    local parts = { packed }
    for i = 1, #extra, 2 do
      parts[#parts + 1] = struct.pack('<dd', extra[i], extra[i + 1])
    end
    packed = table.concat(parts)
  end
  return ' ' .. fmt(st.total) .. ' ' .. packed
end

-- The fast path's adapter (fast.lua): the record's fields as matched by `shape` (live or
-- not; the buckets are the raw bytes from the position captured last), the check, then the
-- new expiry, the fields as text and the count to bound.
SL.shape = '^sl (%-?%d+) (%-?%d+) (%-?%d+) ()'

function SL.fast(p, live, v1, v2, raw, now, base, cost)
  local start = fast_align(base, now, p.precision)
  if start == nil then
    return nil
  end
  local st = SL.fresh()
  if live then
    -- The buckets are the record's bytes from v2 on.
    local total, size = tonumber(v1), #raw - v2 + 1
    if total == nil or size == 0 or size % WIDTH ~= 0 then
      return nil
    end
    st.buf, st.off, st.cnt, st.total = raw, v2 - 1, size / WIDTH, total
  end
  local ok, rem, reset, retry = SL.check(p, st, now, cost, start)
  return ok, rem, reset, retry, SL.empty_at(p, st), SL.fields(st), st.total
end

PARAMS.sl, FASTS.sl = SL.params, SL

-- @general
do
  local M = {}

  local function counted(p, st, now)
    -- Buckets are oldest first: the ones that stopped counting are a prefix.
    local sum = st.total
    for i = 1, SL.len(st) do
      local start, count = SL.get(st, i)
      if start + p.window > now then
        break
      end
      sum = sum - count
    end
    return sum
  end

  M.fresh = SL.fresh

  function M.check(p, st, now, cost)
    local ok, rem, reset, retry = SL.check(p, st, now, cost, T.align(now, p.precision))
    return decision(ok, rem, reset, retry)
  end

  function M.penalize(p, st, now, n)
    SL.prune(p, st, now)
    if n > 0 then
      SL.add(p, st, n, T.align(now, p.precision))
    end
  end

  function M.reward(p, st, now, n)
    SL.prune(p, st, now)
    while n > 0 and SL.len(st) > 0 do
      local start, count = SL.pop_back(st)
      local taken = math.min(count, n)
      st.total = st.total - taken
      n = n - taken
      if count - taken > 0 then
        SL.push_back(st, start, count - taken)
      end
    end
  end

  function M.used(p, st, now)
    return counted(p, st, now)
  end

  function M.fresh_at(p, st)
    return SL.empty_at(p, st)
  end

  -- The fields as they follow the record's head (record.lua): ' <n> <e>', e raw bytes to
  -- the end; nothing when there are no buckets (a record kept for its guard).
  function M.decode(body, shift)
    local st = SL.fresh()
    if body == '' then
      return st
    end
    local n, at = string.match(body, '^ (%-?%d+) ()')
    local total = tonumber(n)
    local e = ''
    if at ~= nil then
      e = string.sub(body, at)
    end
    if total == nil or #e == 0 or #e % WIDTH ~= 0 then
      fail('corrupt', 'sliding window buckets')
    end
    st.buf, st.cnt, st.total = e, #e / WIDTH, total
    if shift ~= 0 then
      -- A rebase moves every start: decode them all, once per 13 days at most.
      local n = st.cnt
      for i = 1, n do
        local start, count = SL.get(st, i)
        SL.push_back(st, start - shift, count)
      end
      st.buf, st.off, st.cnt = '', 0, 0
    end
    return st
  end

  function M.encode(st)
    if SL.len(st) > 0 and st.total > MAX_UNITS then
      fail('horizon', 'count')
    end
    return SL.fields(st)
  end

  ALG.sl = M
end
