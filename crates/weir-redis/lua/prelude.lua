-- prelude.lua: exact integer arithmetic on Lua's doubles, and the clock of one decision.
-- Mirrors crates/weir-core/src/time.rs (until, div_ceil, mul_div_ceil) plus the time
-- encoding of crates/weir-redis/src/lib.rs ("Time encoding"): every instant is a signed
-- offset in ns from the record's base (whole seconds since the Unix epoch), exact while
-- |offset| < 2^53. First of the files concatenated into every script (src/scripts.rs).
-- Redis forbids globals: everything below is a local of the one chunk.

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

-- Integer helpers. Arguments are integers held exactly in doubles.
local N = {}

-- `until(later, now)` of time.rs: later - now, or 0 when later is not after now.
function N.till(later, now)
  if later > now then
    return later - now
  end
  return 0
end

-- Floor division and remainder, exact for |a| < 2^53 and 0 < b < 2^52 (the quotient of
-- the double division may be off by one; the remainder corrects it).
function N.divmod(a, b)
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
function N.div_ceil(a, b)
  local q, r = N.divmod(a, b)
  if r > 0 then
    q = q + 1
  end
  return q
end

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

-- An instant read from the hash and moved by a rebase of `shift` ns; PAST stays PAST; nil
-- when the text is not a number.
local function instant(text, shift)
  local x = tonumber(text)
  if x == nil or x <= PAST then
    return x
  end
  return x - shift
end

-- Decimal text of an integer-valued number, exact (tostring would round to 14 digits).
local function fmt(x)
  return string.format('%.0f', x)
end

-- The clock of the decision being run: its record's base, for epoch-aligned windows.
local T = { base = 0, phases = {} }

-- Now as (whole seconds, nanoseconds within the second): the process clock from ARGV, or
-- the store clock (`TIME`) when the seconds argument is empty.
function T.now(sec_arg, nsec_arg)
  if sec_arg == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]), tonumber(t[2]) * 1000
  end
  return tonumber(sec_arg), tonumber(nsec_arg)
end

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

-- The algorithms, by tag; each file below registers one.
local ALG = {}
