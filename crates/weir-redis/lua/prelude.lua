-- prelude.lua: the general path's helpers: failures, the clock, exact integer arithmetic
-- on Lua's doubles beyond base.lua's (which has the constants, floor division and decimal
-- text), and the epoch alignment of one decision. Mirrors crates/weir-core/src/time.rs
-- (until, div_ceil, mul_div_ceil).

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

-- Now as (whole seconds, nanoseconds within the second): the process clock from ARGV, or
-- the store clock (`TIME`) when the seconds argument is empty.
local function clock(sec_arg, nsec_arg)
  if sec_arg == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]), tonumber(t[2]) * 1000
  end
  return tonumber(sec_arg), tonumber(nsec_arg)
end

-- Integer helpers. Arguments are integers held exactly in doubles.
local N = { till = till, divmod = divmod, div_ceil = div_ceil }

-- The bits of 0 <= b, lowest first.
local function bits_of(b)
  local bits, n = {}, 0
  while b > 0 do
    local bit = b % 2
    n = n + 1
    bits[n] = bit
    b = (b - bit) / 2
  end
  return bits, n
end

-- (a * b) / c as quotient and remainder for 0 <= a < c < 2^52 and 0 <= b < 2^53, by long
-- multiplication over the bits of b (every intermediate stays below 2c).
local function long_muldiv(a, b, c)
  local bits, n = bits_of(b)
  local q, r = 0, 0
  for i = n, 1, -1 do
    q = q * 2
    r = r * 2
    if r >= c then
      r = r - c
      q = q + 1
    end
    if bits[i] == 1 then
      r = r + a
      if r >= c then
        r = r - c
        q = q + 1
      end
    end
  end
  return q, r
end

-- `mul_div_ceil(a, b, c)` of time.rs: ceil(a * b / c) for 0 <= a, b and 0 < c < 2^52,
-- exact even when a * b is far above 2^53.
function N.mul_div_ceil(a, b, c)
  local p = a * b
  if p < TWO53 then
    return N.div_ceil(p, c)
  end
  local qa, ra = N.divmod(a, c)
  local q, r = long_muldiv(ra, b, c)
  if r > 0 then
    q = q + 1
  end
  return qa * b + q
end

-- (a * b) mod m for 0 <= a, 0 <= b < 2^53, 0 < m < 2^52.
function N.mulmod(a, b, m)
  local _, ra = N.divmod(a, m)
  local _, r = long_muldiv(ra, b, m)
  return r
end

-- An instant read from the record and moved by a rebase of `shift` ns; PAST stays PAST; nil
-- when the text is not a number.
local function instant(text, shift)
  local x = tonumber(text)
  if x == nil or x <= PAST then
    return x
  end
  return x - shift
end

-- The clock of the decision being run: its record's base, for epoch-aligned windows.
local T = { base = 0, phases = {} }

-- Points the epoch alignment at a record's base (each record has its own).
function T.use(base)
  if T.base ~= base then
    T.base = base
    T.phases = {}
  end
end

-- `x - x % w` of the pure step for the instant at offset x: the start of the
-- epoch-aligned period of length w (< 2^52) containing it.
function T.align(x, w)
  if w == 1 then
    return x
  end
  local phase = T.phases[w]
  if phase == nil then
    phase = N.mulmod(T.base, SEC_NS, w)
    T.phases[w] = phase
  end
  local _, r = N.divmod(phase + x, w)
  return x - r
end

-- A decision of the pure step (crates/weir-core/src/decision.rs); the limit is the rule's
-- and is filled in on the Rust side.
local function allow(remaining, reset)
  return { ok = true, rem = remaining, reset = reset, retry = 0, delay = 0 }
end

local function deny(remaining, reset, retry)
  return { ok = false, rem = remaining, reset = reset, retry = retry, delay = 0 }
end

-- A decision from the shared steps' values (allowed as a boolean).
local function decision(ok, remaining, reset, retry)
  return { ok = ok, rem = remaining, reset = reset, retry = retry, delay = 0 }
end

-- The algorithms, by tag; each file below registers one.
local ALG = {}
