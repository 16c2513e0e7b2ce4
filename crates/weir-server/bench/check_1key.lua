-- POST /v1/check for one client IP: a static request (no Lua per request), nearly all 429.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.9.9.9"}]}]}'
