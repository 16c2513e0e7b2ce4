//! Weir's memcached store: add/incr for counters, gets/cas for every other algorithm. (Being built.)
