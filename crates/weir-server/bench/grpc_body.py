"""Writes one gRPC frame of ShouldRateLimit to the file named by the first argument:
RateLimitRequest{domain: "api", descriptors: [{entries: [{remote_address: 10.0.0.1}]}]},
the body h2load sends in scripts/bench-server, bench-cpu and bench-instructions."""
import sys

field = lambda number, payload: bytes([(number << 3) | 2, len(payload)]) + payload
request = field(1, b"api") + field(
    2, field(1, field(1, b"remote_address") + field(2, b"10.0.0.1"))
)
with open(sys.argv[1], "wb") as out:
    out.write(b"\x00" + len(request).to_bytes(4, "big") + request)
