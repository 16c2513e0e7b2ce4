-- base.lua: the constants and the primitives the fast path (fast.lua) shares with the
-- general path: exact floor division, decimal text, epoch alignment, and the rule as one
-- ARGV field. First of the files concatenated into every script (src/scripts.rs), and kept
-- small: under EVALSHA the whole chunk runs on every call, and every function defined in
-- it is built again each time (a Redis 7 function library is built once).
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

-- The algorithms' parameter readers and fast-path adapters, by tag: each algorithm's file
-- registers its `params` in PARAMS, and the four with a fast path their adapter in FASTS
-- (see fast.lua).
local PARAMS, FASTS = {}, {}

-- The rule of one decision from its ARGV field (src/encode.rs `RuleArgs`): the algorithm
-- tag, its three parameters ('-' for none) and, when there is a lockout, its base, max and
-- forgive (ns): 'gc 10 100000000 1000000000' or 'fw 3 60000000000 - 5000000000 ...'; last,
-- for a warm-up (warmup.lua), '~' and its period, cold factor and ramp. Parsed
-- once per distinct text: a function library keeps RULES between calls (a bounded cache of
-- values that never change, so nothing a replica would need); under EVALSHA it lives for
-- one call. nil when the text is not a rule of an algorithm in this script.
local RULES, RULE_COUNT = {}, 0
local function rule(text)
  local p = RULES[text]
  if p ~= nil then
    return p
  end
  local head, ww, wc, wx = string.match(text, '^(.-) ~(%d+) (%d+) (%d+)$')
  local tag, a, b, c, lb, lm, lf =
    string.match(head or text, '^(%l%l) (%S+) (%S+) (%S+) ?(%d*) ?(%d*) ?(%d*)$')
  local params = PARAMS[tag]
  if params == nil then
    return nil
  end
  p = { tag = tag }
  params(p, tonumber(a), tonumber(b), tonumber(c))
  if lb ~= '' then
    p.lock_base, p.lock_max, p.forgive = tonumber(lb), tonumber(lm), tonumber(lf)
  end
  if head ~= nil then
    p.warm, p.cold, p.ramp = tonumber(ww), tonumber(wc), tonumber(wx)
  end
  if RULE_COUNT >= 1024 then
    RULES, RULE_COUNT = {}, 0
  end
  RULES[text], RULE_COUNT = p, RULE_COUNT + 1
  return p
end

-- T.align (prelude.lua) for the offset x from `base`, without its long multiplication:
-- the start of the epoch-aligned period of w ns containing x, or nil when the phase (base
-- * 10^9 mod w) is not computed here (the fast path then gives up). The phase is exact:
-- below 2^30 the product is split into 16-bit halves of base (every partial product <
-- 2^47), and a whole number of seconds gives (base mod seconds) * 10^9.
local function fast_align(base, x, w)
  if w == 1 then
    return x
  end
  if base < 0 or base >= 4294967296 or base % 1 ~= 0 then
    return nil
  end
  local phase
  if w <= 1073741824 then
    local m = SEC_NS % w
    local low = base % 65536
    local high = (base - low) / 65536
    phase = (((high * m) % w) * 65536 + low * m) % w
  elseif w % SEC_NS == 0 then
    phase = (base % (w / SEC_NS)) * SEC_NS
  else
    return nil
  end
  local _, r = divmod(phase + x, w)
  return x - r
end
