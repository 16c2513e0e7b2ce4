//! The buckets of a lock-free table (`compact.rs`, `strings.rs`), made a chunk at a time
//! as keys first need them, and two other things both tables share: how many buckets a
//! table of a given size has, and which two buckets a key may sit in. Not on the path of
//! a decision itself: a table asks here for the bucket it then reads.

use std::sync::OnceLock;

/// Slots per record of capacity: room so that two-choice buckets rarely overflow.
const SLOTS_PER_RECORD_NUM: usize = 5;
const SLOTS_PER_RECORD_DEN: usize = 4;

/// The buckets of one table: `len` of them, `N` to a chunk, each chunk allocated when a key
/// first needs one of its buckets (making a bucket writes it, so a table made whole would
/// be resident whole from its first key).
pub(super) struct Chunks<B, const N: usize> {
    chunks: Box<[OnceLock<Box<[B]>>]>,
    len: usize,
}

impl<B: Default, const N: usize> Chunks<B, N> {
    /// Buckets for `records` records of `slots` slots each (1.25 slots a record, two at
    /// least), none made yet.
    pub(super) fn for_records(records: usize, slots: usize) -> Self {
        let wanted = records.saturating_mul(SLOTS_PER_RECORD_NUM) / SLOTS_PER_RECORD_DEN;
        let len = wanted.div_ceil(slots.max(1)).max(2);
        Self {
            chunks: std::iter::repeat_with(OnceLock::new)
                .take(len.div_ceil(N))
                .collect(),
            len,
        }
    }

    /// How many buckets (made or not).
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The bucket at `index`, if its chunk has been made (a bucket of a chunk not made yet
    /// holds no key).
    #[inline(always)]
    pub(super) fn get(&self, index: usize) -> Option<&B> {
        self.chunks.get(index / N)?.get()?.get(index % N)
    }

    /// The bucket at `index`, its chunk made if need be (the insert path).
    pub(super) fn made(&self, index: usize) -> Option<&B> {
        let chunk = self.chunks.get(index / N)?.get_or_init(|| {
            // Made on the heap directly (a chunk is not for a thread's stack).
            std::iter::repeat_with(B::default).take(N).collect()
        });
        chunk.get(index % N)
    }

    /// Every bucket made so far.
    pub(super) fn iter(&self) -> impl Iterator<Item = &B> + '_ {
        self.chunks
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|c| c.iter())
    }

    /// Bytes taken: the chunks made so far, and the chunks' index.
    pub(super) fn bytes(&self) -> usize {
        let made = self.chunks.iter().filter(|c| c.get().is_some()).count();
        made * N * std::mem::size_of::<B>() + std::mem::size_of_val(&*self.chunks)
    }
}

/// The indices of a key's two buckets of `n` (distinct when `n` is two or more): the
/// first from the hash's high bits, the second from a remix of it.
#[inline]
pub(super) fn two_buckets(hash: u64, n: usize) -> [usize; 2] {
    let reduce = |h: u64| {
        let i = (u128::from(h) * (n as u128)) >> 64;
        usize::try_from(i).unwrap_or(0)
    };
    let first = reduce(hash);
    let mut second = reduce(hash.rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15);
    if second == first {
        second = (first + 1) % n.max(1);
    }
    [first, second]
}
