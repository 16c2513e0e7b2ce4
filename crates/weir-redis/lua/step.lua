-- step.lua: the one step, applied to a loaded record: expiry, block and lockout, dispatch
-- of the operation to the algorithm, and the record's new expiry.
-- Mirrors crates/weir-core/src/step.rs (`apply` and its helpers) line for line. The
-- operation was validated on the Rust side first (`step::validate` rules), so nothing
-- here can fail on bad input.
local S = {}

-- The rule of one decision from its ARGV field (`rule` in base.lua), with its algorithm's
-- module.
function S.rule(text)
  local p = rule(text)
  if p == nil then
    error('weir: algorithm ' .. tostring(string.sub(text, 1, 2)) .. ' is not in this script')
  end
  p.M = ALG[p.tag]
  return p
end

-- Makes rec.st the rule's state: fresh (an expired record, another algorithm) or decoded.
local function state(p, rec, now)
  if rec.x <= now then
    rec.g = nil
    rec.st, rec.alg = p.M.fresh(p, now), p.tag
  elseif rec.alg ~= p.tag then
    rec.st, rec.alg = p.M.fresh(p, now), p.tag
  elseif rec.st == nil then
    rec.st = p.M.decode(rec.body, rec.shift)
  end
end

-- `Lockout::duration_ns`: base * 2^strikes, at most max.
local function lockout_ns(p, strikes)
  return math.min(p.lock_base * 2 ^ math.min(strikes, 63), p.lock_max)
end

-- A denial while the key is blocked: nothing else is looked at.
local function blocked(rec, now)
  local until_ns = PAST
  if rec.g ~= nil then
    until_ns = rec.g.b
  end
  if until_ns > now then
    local wait = until_ns - now
    return deny(0, math.max(wait, N.till(rec.x, now)), wait)
  end
  return nil
end

-- Acquire (or, with an empty holder, peek at) a concurrency lease.
local function acquire(p, rec, now, holder, ttl)
  local d = blocked(rec, now)
  if d then
    return d
  end
  if p.tag == 'cc' then
    return p.M.acquire(p, rec.st, now, holder, ttl, holder == '')
  end
  return deny(0, 0, 0)
end

local function check(p, rec, now, cost)
  local d = blocked(rec, now)
  if d then
    return d
  end
  if p.tag == 'cc' then
    return acquire(p, rec, now, '', 0)
  end
  d = p.M.check(p, rec.st, now, cost)
  if p.lock_base ~= nil and not d.ok and cost > 0 then
    local g = rec.g
    if g == nil then
      g = { b = PAST, s = 0, e = PAST }
      rec.g = g
    end
    local block = lockout_ns(p, g.s)
    g.b = now + block
    g.s = math.min(g.s + 1, U32_MAX)
    g.e = g.b + p.forgive
    d.retry = block
    -- As `blocked` answers from the next instant on: until the record is fresh again.
    d.reset = math.max(d.reset, block, g.e - now, p.M.fresh_at(p, rec.st) - now)
    d.rem = 0
  end
  return d
end

local function expiry(p, rec)
  local at = p.M.fresh_at(p, rec.st)
  local g = rec.g
  if g ~= nil then
    at = math.max(at, g.b, g.e)
  end
  return at
end

local function inspect(p, rec, now)
  local g = rec.g or { b = PAST, s = 0, e = PAST }
  return {
    used = p.M.used(p, rec.st, now),
    blocked = N.till(g.b, now),
    strikes = g.s,
    reset = N.till(expiry(p, rec), now),
  }
end

-- `step::apply`: op is one of c (check; cost 0 = peek), p (penalty), w (reward), b
-- (block), u (unblock), r (reset), i (inspect), a (acquire), l (release). Returns
-- (kind, value): 'decision' with a decision, 'usage', 'released' with a boolean, or 'done'.
function S.apply(p, rec, op, n, holder, now)
  T.use(rec.base)
  state(p, rec, now)
  local g = rec.g
  if g ~= nil and g.b <= now and g.e <= now then
    rec.g = nil
  end
  local kind, out = 'decision', nil
  if op == 'c' then
    out = check(p, rec, now, n)
  elseif op == 'p' then
    p.M.penalize(p, rec.st, now, n)
    out = check(p, rec, now, 0)
  elseif op == 'w' then
    p.M.reward(p, rec.st, now, n)
    out = check(p, rec, now, 0)
  elseif op == 'b' then
    rec.g = rec.g or { b = PAST, s = 0, e = PAST }
    rec.g.b = now + n
    kind = 'done'
  elseif op == 'u' then
    -- step.rs: lift the block, forgive the strikes, and under a lockout clear the usage
    -- that engaged it, so that the key's next attempt is allowed and not escalated.
    rec.g = nil
    if p.lock_base ~= nil then
      rec.st, rec.alg = p.M.fresh(p, now), p.tag
    end
    kind = 'done'
  elseif op == 'r' then
    rec.x, rec.g = PAST, nil
    rec.st, rec.alg = p.M.fresh(p, now), p.tag
    kind = 'done'
  elseif op == 'i' then
    kind, out = 'usage', inspect(p, rec, now)
  elseif op == 'a' then
    out = acquire(p, rec, now, holder, n)
  elseif op == 'l' then
    kind, out = 'released', p.tag == 'cc' and p.M.release(p, rec.st, now, holder)
  else
    error('weir: unknown operation ' .. tostring(op))
  end
  rec.x = expiry(p, rec)
  return kind, out
end

-- Whether an operation may create a record for a key the store does not hold
-- (`Op::creates_record`).
function S.creates(op, n)
  return (op == 'c' and n > 0) or op == 'p' or op == 'b' or op == 'a'
end

-- Stores the record if it is live and may be stored, deletes it if it is held and not
-- live (`Model::apply`'s rule). Its text is built, and checked, before anything changes.
function S.prepare(rec, may_create)
  if rec.x > rec.now and (rec.live or may_create) then
    return 'write', R.encode(rec)
  elseif rec.held then
    return 'delete', nil
  end
  return 'keep', nil
end

function S.commit(rec, action, enc, grace_ms)
  if action == 'write' then
    R.write(rec, enc, grace_ms)
  elseif action == 'delete' then
    redis.call('DEL', rec.key)
  end
end

-- The reply of one operation: {1, allowed, remaining, reset, retry, delay} for a
-- decision, {2, used, blocked, strikes, reset} for usage, {3, 0|1} released, {4} done.
function S.reply(kind, out)
  if kind == 'decision' then
    local ok = 0
    if out.ok then
      ok = 1
    end
    return { 1, ok, out.rem, out.reset, out.retry, out.delay }
  elseif kind == 'usage' then
    return { 2, out.used, out.blocked, out.strikes, out.reset }
  elseif kind == 'released' then
    if out then
      return { 3, 1 }
    end
    return { 3, 0 }
  end
  return { 4 }
end

-- One operation on the record at `key` (Store::apply): load it, run the step, store it
-- iff it is live (and held, or the operation adds usage), delete it otherwise; mirrors
-- crates/weir-testkit/src/model.rs `Model::apply`. `argv[i..i+2]`: operation, its number
-- (cost, units, duration or TTL in ns), holder; `argv[r]` the rule (S.rule). `raw` is the
-- key's GET when the fast path (fast.lua) read it already and gave up.
function S.one(key, sec, nsec, grace_ms, argv, i, r, raw)
  local op, n, holder = argv[i], tonumber(argv[i + 1]) or 0, argv[i + 2]
  local p = S.rule(argv[r])
  local rec = R.load(key, sec, nsec, raw)
  local kind, out = S.apply(p, rec, op, n, holder, rec.now)
  local action, enc = S.prepare(rec, S.creates(op, n))
  S.commit(rec, action, enc, grace_ms)
  return S.reply(kind, out)
end

-- Runs main() and turns a weir failure into the reply {-1, code, message}.
function S.run(main)
  local ok, res = pcall(main)
  if ok then
    return res
  end
  return failure(res)
end
