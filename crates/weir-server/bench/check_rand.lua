-- POST /v1/check for one of 100 000 client IPs, chosen at random per request (each wrk
-- thread with its own seed, so the threads do not replay one sequence). The body is also a
-- valid envoyproxy/ratelimit `POST /json` request: scripts/bench-cpu loads /json with it too.
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
