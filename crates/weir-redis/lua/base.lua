-- base.lua: the constants and the two primitives the fast path (fast.lua) shares with the
-- general path: exact floor division and decimal text. First of the files concatenated
-- into every script (src/scripts.rs), and kept to two functions: EVALSHA runs the whole
-- chunk on every call, and every function defined in it is built again each time.
-- The time encoding is crates/weir-redis/src/lib.rs's ("Time encoding"): every instant
-- is a signed offset in ns from the record's base (whole seconds since the Unix epoch),
-- exact while |offset| < 2^53. Redis forbids globals: everything is a local of the one
-- chunk.

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

-- Decimal text of an integer-valued number, exact (tostring would round to 14 digits).
-- '%d' is twice as fast as '%.0f' and writes the same digits for an integer below 2^63;
-- '%.0f' takes the rest.
local function fmt(x)
  if x % 1 == 0 and x > -9223372036854775808 and x < 9223372036854775808 then
    return string.format('%d', x)
  end
  return string.format('%.0f', x)
end
