-- sliding.lua: the sliding window log (precision 1 ns) and the sliding window counter.
-- Mirrors crates/weir-core/src/algorithm/sliding.rs step for step (same buckets, same
-- integers); weir-testkit's conformance suite checks they agree.
-- State field: e = the non-empty buckets, oldest first, as a MessagePack array
-- [start1, count1, start2, count2, ...] (starts are offsets); absent when there are none.
-- In memory: st.e holds the pairs from index st.h up to st.n - 1 (a deque), st.total
-- their sum.
do
  local M = {}

  function M.params(p, a, b, c)
    p.limit, p.window, p.precision = a, b, c
  end

  local function max_entries(p)
    return math.max(math.min(p.limit, p.window / p.precision), 1)
  end

  -- Drops the buckets that no longer count at now.
  local function prune(p, st, now)
    local e, h = st.e, st.h
    while h < st.n and e[h] + p.window <= now do
      st.total = st.total - e[h + 1]
      h = h + 2
    end
    st.h = h
  end

  local function counted(p, st, now)
    local e, sum = st.e, 0
    for i = st.h, st.n - 2, 2 do
      if e[i] + p.window > now then
        sum = sum + e[i + 1]
      end
    end
    return sum
  end

  local function add(p, st, now, n)
    local e = st.e
    local start = T.align(now, p.precision)
    local full = (st.n - st.h) / 2 >= max_entries(p)
    if st.n > st.h then
      local back = st.n - 2
      -- A lagging clock counts into the newest bucket, never an older one.
      start = math.max(start, e[back])
      if e[back] == start or full then
        e[back] = start
        e[back + 1] = e[back + 1] + n
        st.total = st.total + n
        return
      end
    end
    e[st.n] = start
    e[st.n + 1] = n
    st.n = st.n + 2
    st.total = st.total + n
  end

  local function empty_at(p, st)
    if st.n > st.h then
      return st.e[st.n - 2] + p.window
    end
    return PAST
  end

  function M.fresh()
    return { e = {}, h = 1, n = 1, total = 0 }
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
    local e = st.e
    local to_free = st.total + want - p.limit
    local retry = empty_at(p, st)
    for i = st.h, st.n - 2, 2 do
      if e[i + 1] >= to_free then
        retry = e[i] + p.window
        break
      end
      to_free = to_free - e[i + 1]
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
    local e = st.e
    while n > 0 and st.n > st.h do
      local back = st.n - 2
      local taken = math.min(e[back + 1], n)
      e[back + 1] = e[back + 1] - taken
      st.total = st.total - taken
      n = n - taken
      if e[back + 1] == 0 then
        e[back], e[back + 1] = nil, nil
        st.n = back
      end
    end
  end

  function M.used(p, st, now)
    return counted(p, st, now)
  end

  function M.fresh_at(p, st)
    return empty_at(p, st)
  end

  function M.decode(f, shift)
    local st = M.fresh()
    if f.e == nil then
      return st
    end
    local ok, e = pcall(cmsgpack.unpack, f.e)
    if not ok or type(e) ~= 'table' or #e % 2 ~= 0 then
      fail('corrupt', 'sliding window buckets')
    end
    local total = 0
    for i = 1, #e, 2 do
      local start, count = e[i], e[i + 1]
      if type(start) ~= 'number' or type(count) ~= 'number' then
        fail('corrupt', 'sliding window bucket')
      end
      e[i] = start - shift
      total = total + count
    end
    st.e, st.n, st.total = e, #e + 1, total
    return st
  end

  function M.encode(st, out)
    if st.n <= st.h then
      return
    end
    if st.total > MAX_UNITS then
      fail('horizon', 'count')
    end
    local e, packed, k = st.e, {}, 0
    for i = st.h, st.n - 1 do
      k = k + 1
      packed[k] = e[i]
    end
    out[#out + 1] = 'e'
    out[#out + 1] = cmsgpack.pack(packed)
  end

  ALG.sl = M
end
