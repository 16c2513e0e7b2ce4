//! Benchmarks (placeholder until the criterion suite lands).
fn main() {}
