-- GET / on the hello-world ceiling with the same per-request client work as check_rand.lua
-- (a random number and a request formatted in Lua), so that the ceiling and weir are loaded
-- by the same client: wrk with a Lua `request()` sends less per second than plain wrk, and
-- a server loaded more lightly pays more kernel time a request (fewer requests per wake-up).
local nthreads = 0
function setup(thread)
  nthreads = nthreads + 1
  thread:set("tid", nthreads)
end
function init(args)
  math.randomseed(os.time() * 7919 + (tid or 0))
end
function request()
  local n = math.random(0, 99999)
  return wrk.format("GET", "/", nil, nil)
end
