//! Weir's Redis / Valkey store (single node, Sentinel, Cluster): one Lua script per algorithm, run by EVALSHA. (Being built.)
