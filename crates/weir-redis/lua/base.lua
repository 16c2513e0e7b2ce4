-- base.lua: the constants and the few primitives both paths use: exact integer division,
-- `until`, decimal text, the clock of a decision, and how a failure becomes a reply.
-- First of the files concatenated into every script (src/scripts.rs); kept small, since
-- every script call runs it, even one the fast path (fast.lua) answers. Mirrors
-- crates/weir-core/src/time.rs (until, div_ceil) plus the time encoding of
-- crates/weir-redis/src/lib.rs ("Time encoding"): every instant is a signed offset in ns
-- from the record's base (whole seconds since the Unix epoch), exact while
-- |offset| < 2^53. Redis forbids globals: everything is a local of the one chunk.

-- The instant 0 of the pure step ("not set", "never"), far below any real offset.
local PAST = -4611686018427387904 -- -2^62
-- Above this |now - base| the record is rebased onto now's second (src/lib.rs).
local REBASE_NS = 1125899906842624 -- 2^50
-- The furthest a record may reach past now, and the largest count it may hold; an
-- operation that would go further is refused (the Rust side checks every parameter
-- against half of it, `MAX_SPAN_NS`, so only piled-up penalties can get here).
local REACH_NS = 4503599627370496 -- 2^52
local MAX_UNITS = 4503599627370496 -- 2^52
local TWO53 = 9007199254740992
local U32_MAX = 4294967295
local SEC_NS = 1000000000

-- Raises an error the entry point turns into a reply {-1, code, message}; it happens
-- before any write, so the record is left as it was.
local function fail(code, message)
  error({ weir = code, msg = message })
end

-- The reply of a failed call: a weir refusal as {-1, code, message}, anything else (an
-- error of Redis's, such as READONLY or OOM) as an error reply.
local function failure(res)
  if type(res) == 'table' and res.weir ~= nil then
    return { -1, res.weir, res.msg }
  end
  if type(res) == 'table' and res.err ~= nil then
    return redis.error_reply(res.err)
  end
  return redis.error_reply(tostring(res))
end

-- Floor division and remainder, exact for |a| < 2^53 and 0 < b < 2^52 (the quotient of
-- the double division may be off by one; the remainder corrects it).
local function divmod(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  while r < 0 do
    q = q - 1
    r = r + b
  end
  while r >= b do
    q = q + 1
    r = r - b
  end
  return q, r
end

-- `div_ceil(a, b)` of time.rs for 0 <= a.
local function div_ceil(a, b)
  local q, r = divmod(a, b)
  if r > 0 then
    q = q + 1
  end
  return q
end

-- `until(later, now)` of time.rs: later - now, or 0 when later is not after now.
local function till(later, now)
  if later > now then
    return later - now
  end
  return 0
end

-- Decimal text of an integer-valued number, exact (tostring would round to 14 digits).
local function fmt(x)
  return string.format('%.0f', x)
end

-- Now as (whole seconds, nanoseconds within the second): the process clock from ARGV, or
-- the store clock (`TIME`) when the seconds argument is empty.
local function clock(sec_arg, nsec_arg)
  if sec_arg == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]), tonumber(t[2]) * 1000
  end
  return tonumber(sec_arg), tonumber(nsec_arg)
end
