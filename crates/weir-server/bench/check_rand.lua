-- POST /v1/check for one of 100 000 client IPs, chosen at random per request.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local prefix = '{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.'
math.randomseed(os.time())
request = function()
  local n = math.random(0, 99999)
  local body = prefix .. tostring(n) .. '"}]}]}'
  return wrk.format(nil, nil, nil, body)
end
