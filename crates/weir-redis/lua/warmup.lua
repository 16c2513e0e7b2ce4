-- warmup.lua: warm-up around GCRA (tag gw) and the token bucket (tag tw).
-- Mirrors crates/weir-core/src/algorithm/warmup.rs step for step (`Warmed`, `WarmUp::advance`:
-- same state, same integers); weir-testkit's conformance suite checks they agree. The
-- plain algorithm's general module does the rest (its check, penalty, reward, and `full_at`
-- and `charge`, `Ramped` in Rust). All general module: a warm-up rule never takes the fast
-- path (fast.lua finds no adapter for gw or tw).
-- Rule (base.lua `rule`): the plain algorithm's parameters, then p.warm (W, ns), p.cold
-- (c) and p.ramp (X = floor(2W / (c + 1)), computed on the Rust side).
-- State fields: the plain algorithm's, then w = the ramp position (ns of full-rate time
-- admitted since the key was last cold, at most X; not an instant, so never rebased).
-- Exact: x <= X < 2^51 (W is at most 2^51), so x * x / 2X is long multiplication
-- (prelude.lua) and (c - 1) * X < 2W.
do
  -- H(x) of warmup.rs: (c - 1) * (x - floor(x^2 / 2X)), for 0 <= x <= X.
  local function surcharge_to(p, x)
    x = math.min(x, p.ramp)
    local square = long_muldiv(x, x, 2 * p.ramp)
    return (p.cold - 1) * (x - square)
  end

  -- `WarmUp::advance`: the surcharge of admitting `add` ns of full-rate time at x, and
  -- the new position.
  local function advance(p, x, add)
    x = math.min(x, p.ramp)
    local y = math.min(x + add, p.ramp)
    return surcharge_to(p, y) - surcharge_to(p, x), y
  end

  -- The warm-up module around the plain algorithm `base`.
  local function warmed(base)
    local M = {}

    -- The ramp position at now: zero once the key has been full for W (idle).
    local function warmth(p, B, st, now)
      if now >= B.full_at(p, st) + p.warm then
        return 0
      end
      return st.w
    end

    function M.fresh(p, now)
      local st = ALG[base].fresh(p, now)
      st.w = 0
      return st
    end

    function M.check(p, st, now, cost)
      local B = ALG[base]
      local warm = warmth(p, B, st, now)
      local d = B.check(p, st, now, cost)
      if not d.ok or cost == 0 then
        return d
      end
      local extra, w = advance(p, warm, cost * p.interval)
      st.w = w
      if extra == 0 then
        return d
      end
      B.charge(p, st, now, extra)
      -- A peek changes nothing: the decision as the state now stands.
      local peek = B.check(p, st, now, 0)
      return allow(peek.rem, peek.reset)
    end

    function M.penalize(p, st, now, n)
      local B = ALG[base]
      st.w = warmth(p, B, st, now)
      B.penalize(p, st, now, n)
    end

    function M.reward(p, st, now, n)
      local B = ALG[base]
      st.w = warmth(p, B, st, now)
      B.reward(p, st, now, n)
    end

    function M.used(p, st, now)
      return ALG[base].used(p, st, now)
    end

    function M.fresh_at(p, st)
      local B = ALG[base]
      local at = B.fresh_at(p, st)
      if st.w == 0 then
        return at
      end
      return math.max(at, B.full_at(p, st) + p.warm)
    end

    -- The fields as they follow the record's head (record.lua): the plain algorithm's,
    -- then ' <w>'.
    function M.decode(body, shift)
      local plain, w = string.match(body, '^(.*) (%d+)$')
      if plain == nil then
        fail('corrupt', 'warm-up state')
      end
      local st = ALG[base].decode(plain, shift)
      st.w = tonumber(w)
      return st
    end

    function M.encode(st)
      return ALG[base].encode(st) .. ' ' .. fmt(st.w)
    end

    return M
  end

  PARAMS.gw = function(p, a, b, c)
    PARAMS.gc(p, a, b, c)
  end
  PARAMS.tw = function(p, a, b, c)
    PARAMS.tb(p, a, b, c)
  end
  ALG.gw, ALG.tw = warmed('gc'), warmed('tb')
end
