//! The cheap random draw that picks a load generator's key per check. Not on a
//! decision's path: it only spreads load.

/// A xorshift64 generator: one key index per check, cheap enough not to show in a
/// measurement. Not for anything but spreading load.
#[derive(Debug, Clone, Copy)]
pub struct Xorshift(u64);

impl Xorshift {
    /// Starts from `seed` (zero is moved off zero, where xorshift would stay).
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed | u64::from(seed == 0))
    }

    /// The next draw, below `n` (`n` of zero is taken as one).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}
