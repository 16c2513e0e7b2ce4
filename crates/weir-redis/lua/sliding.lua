-- sliding.lua: the sliding window log (precision 1 ns) and the sliding window counter.
-- Mirrors crates/weir-core/src/algorithm/sliding.rs step for step (same buckets, same
-- integers); weir-testkit's conformance suite checks they agree.
-- State fields: e = the non-empty buckets, oldest first, packed as little-endian doubles
-- (start offset, count), 16 bytes each; n = their total. Stored as n then e (e last, raw
-- bytes); both absent when there are none.
-- A call decodes only the buckets it touches (pruned at the front, merged or taken at the
-- back), so a log of 10 000 entries costs what a short one does, plus copying bytes.
do
  local M = {}
  local WIDTH = 16

  function M.params(p, a, b, c)
    p.limit, p.window, p.precision = a, b, c
  end

  -- The deque: `buf` holds `cnt` packed buckets from bucket `head` on (1-based), then
  -- `extra` holds buckets decoded or added during this call ({start, count} pairs, flat).
  local function len(st)
    return st.cnt + #st.extra / 2
  end

  -- Bucket i (1-based, oldest first): start, count.
  local function get(st, i)
    if i <= st.cnt then
      local start, count = struct.unpack('<dd', st.buf, (st.head + i - 2) * WIDTH + 1)
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
  local function pop_back(st)
    local n = #st.extra
    if n > 0 then
      local start, count = st.extra[n - 1], st.extra[n]
      st.extra[n], st.extra[n - 1] = nil, nil
      return start, count
    end
    local start, count = get(st, st.cnt)
    st.cnt = st.cnt - 1
    return start, count
  end

  local function push_back(st, start, count)
    local n = #st.extra
    st.extra[n + 1], st.extra[n + 2] = start, count
  end

  local function max_entries(p)
    return math.max(math.min(p.limit, p.window / p.precision), 1)
  end

  -- Drops the buckets that no longer count at now.
  local function prune(p, st, now)
    while len(st) > 0 do
      local start, count = get(st, 1)
      if start + p.window > now then
        break
      end
      st.total = st.total - count
      pop_front(st)
    end
  end

  local function counted(p, st, now)
    -- Buckets are oldest first: the ones that stopped counting are a prefix.
    local sum = st.total
    for i = 1, len(st) do
      local start, count = get(st, i)
      if start + p.window > now then
        break
      end
      sum = sum - count
    end
    return sum
  end

  local function add(p, st, now, n)
    local start = T.align(now, p.precision)
    local full = len(st) >= max_entries(p)
    if len(st) > 0 then
      local back_start, back_count = get(st, len(st))
      -- A lagging clock counts into the newest bucket, never an older one.
      start = math.max(start, back_start)
      if back_start == start or full then
        pop_back(st)
        push_back(st, start, back_count + n)
        st.total = st.total + n
        return
      end
    end
    push_back(st, start, n)
    st.total = st.total + n
  end

  local function empty_at(p, st)
    if len(st) > 0 then
      local start = get(st, len(st))
      return start + p.window
    end
    return PAST
  end

  function M.fresh()
    return { buf = '', head = 1, cnt = 0, extra = {}, total = 0 }
  end

  function M.check(p, st, now, cost)
    prune(p, st, now)
    local want = math.max(cost, 1)
    if st.total + want <= p.limit then
      if cost > 0 then
        add(p, st, now, cost)
      end
      return allow(p.limit - st.total, N.till(empty_at(p, st), now))
    end
    local to_free = st.total + want - p.limit
    local retry = empty_at(p, st)
    for i = 1, len(st) do
      local start, count = get(st, i)
      if count >= to_free then
        retry = start + p.window
        break
      end
      to_free = to_free - count
    end
    return deny(math.max(p.limit - st.total, 0), N.till(empty_at(p, st), now), N.till(retry, now))
  end

  function M.penalize(p, st, now, n)
    prune(p, st, now)
    if n > 0 then
      add(p, st, now, n)
    end
  end

  function M.reward(p, st, now, n)
    prune(p, st, now)
    while n > 0 and len(st) > 0 do
      local start, count = pop_back(st)
      local taken = math.min(count, n)
      st.total = st.total - taken
      n = n - taken
      if count - taken > 0 then
        push_back(st, start, count - taken)
      end
    end
  end

  function M.used(p, st, now)
    return counted(p, st, now)
  end

  function M.fresh_at(p, st)
    return empty_at(p, st)
  end

  -- The fields as they follow the record's head (record.lua): ' <n> <e>', e raw bytes to
  -- the end; nothing when there are no buckets (a record kept for its guard).
  function M.decode(body, shift)
    local st = M.fresh()
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
        local start, count = get(st, i)
        push_back(st, start - shift, count)
      end
      st.buf, st.cnt = '', 0
    end
    return st
  end

  function M.encode(st)
    if len(st) == 0 then
      return ''
    end
    if st.total > MAX_UNITS then
      fail('horizon', 'count')
    end
    local packed = string.sub(st.buf, (st.head - 1) * WIDTH + 1, (st.head - 1 + st.cnt) * WIDTH)
    local extra = st.extra
    if #extra > 0 then
      local parts = { packed }
      for i = 1, #extra, 2 do
        parts[#parts + 1] = struct.pack('<dd', extra[i], extra[i + 1])
      end
      packed = table.concat(parts)
    end
    return ' ' .. fmt(st.total) .. ' ' .. packed
  end

  ALG.sl = M
end
