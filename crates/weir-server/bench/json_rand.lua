-- POST /json (envoyproxy/ratelimit's JSON endpoint) for one of 100 000 client IPs, chosen at
-- random per request, as check_rand.lua does for /v1/check.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local prefix = '{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.'
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
  return wrk.format(nil, nil, nil, prefix .. tostring(n) .. '"}]}]}')
end
