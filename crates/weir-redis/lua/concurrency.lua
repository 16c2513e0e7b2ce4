-- concurrency.lua: concurrency leases, a semaphore whose permits expire (re-entrant, with
-- hold counts). Mirrors crates/weir-core/src/algorithm/concurrency.rs step for step;
-- weir-testkit's conformance suite checks they agree.
-- State field: e = the leases in acquisition order, as a MessagePack array
-- [holder1, holds1, expires1, holder2, ...] (expiries are offsets); absent when none.
do
  local M = {}

  function M.params(p, a)
    p.max_leases = a
  end

  local function prune(st, now)
    local kept = {}
    for _, lease in ipairs(st) do
      if lease.e > now then
        kept[#kept + 1] = lease
      end
    end
    for i = #st, 1, -1 do
      st[i] = nil
    end
    for i, lease in ipairs(kept) do
      st[i] = lease
    end
  end

  local function live(st, now)
    local n = 0
    for _, lease in ipairs(st) do
      if lease.e > now then
        n = n + 1
      end
    end
    return n
  end

  local function last_expiry(st)
    local last = PAST
    for _, lease in ipairs(st) do
      last = math.max(last, lease.e)
    end
    return last
  end

  function M.fresh()
    return {}
  end

  -- Takes (or re-enters) a lease; an empty holder with dry_run only reports.
  function M.acquire(p, st, now, holder, ttl, dry_run)
    prune(st, now)
    local expires = now + ttl
    local n = live(st, now)
    for _, lease in ipairs(st) do
      if lease.h == holder then
        if not dry_run then
          lease.n = math.min(lease.n + 1, U32_MAX)
          lease.e = math.max(lease.e, expires)
        end
        return allow(math.max(p.max_leases - n, 0), N.till(last_expiry(st), now))
      end
    end
    if n < p.max_leases then
      local used = n
      if not dry_run then
        st[#st + 1] = { h = holder, n = 1, e = expires }
        used = n + 1
      end
      return allow(p.max_leases - used, N.till(last_expiry(st), now))
    end
    local oldest = nil
    for _, lease in ipairs(st) do
      if oldest == nil or lease.e < oldest then
        oldest = lease.e
      end
    end
    return deny(0, N.till(last_expiry(st), now), N.till(oldest or now, now))
  end

  -- Releases one hold of holder's lease; whether it held a live one.
  function M.release(p, st, now, holder)
    prune(st, now)
    for i, lease in ipairs(st) do
      if lease.h == holder then
        lease.n = math.max(lease.n - 1, 0)
        if lease.n == 0 then
          table.remove(st, i)
        end
        return true
      end
    end
    return false
  end

  function M.used(p, st, now)
    return live(st, now)
  end

  function M.fresh_at(p, st)
    return last_expiry(st)
  end

  -- The field as it follows the record's head (record.lua): ' <e>', raw bytes to the end;
  -- nothing when no lease is held (a record kept for its guard).
  function M.decode(body, shift)
    local st = {}
    if body == '' then
      return st
    end
    if string.sub(body, 1, 1) ~= ' ' then
      fail('corrupt', 'leases')
    end
    local ok, e = pcall(cmsgpack.unpack, string.sub(body, 2))
    if not ok or type(e) ~= 'table' or #e % 3 ~= 0 then
      fail('corrupt', 'leases')
    end
    for i = 1, #e, 3 do
      local h, n, x = e[i], e[i + 1], e[i + 2]
      if type(h) ~= 'string' or type(n) ~= 'number' or type(x) ~= 'number' then
        fail('corrupt', 'lease')
      end
      st[#st + 1] = { h = h, n = n, e = x - shift }
    end
    return st
  end

  function M.encode(st)
    if #st == 0 then
      return ''
    end
    local packed = {}
    for _, lease in ipairs(st) do
      packed[#packed + 1] = lease.h
      packed[#packed + 1] = lease.n
      packed[#packed + 1] = lease.e
    end
    return ' ' .. cmsgpack.pack(packed)
  end

  PARAMS.cc, ALG.cc = M.params, M
end
