//! The Lua scripts, assembled at compile time from `lua/*.lua`: one per algorithm for a
//! single operation (base, the fast path and its head, then the general path: prelude,
//! record, that algorithm, step, `single.lua`) and one with every algorithm for several
//! limits at once (`multi.lua`) and for a batch of operations (`batch.lua`). The store
//! picks one here and runs it by `EVALSHA` (`redis::Script` loads it on `NOSCRIPT` and
//! retries).
//!
//! Order matters for cost: `EVALSHA` runs the whole chunk on every call, and each function
//! it defines is a closure built per call. The fast path (`fast.lua`) and the single
//! script's head (`single_fast.lua`) come before the general path's definitions, so a
//! call the fast path answers returns before building any of them.

use std::sync::LazyLock;

use redis::Script;
use weir_core::Algorithm;

/// The algorithm tag a record stores (`a`, the first field of its string) and scripts dispatch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    FixedWindow,
    Sliding,
    Weighted,
    TokenBucket,
    LeakyBucket,
    Gcra,
    LeakyQueue,
    Concurrency,
}

impl Tag {
    /// The tag of a rule's algorithm; `None` for an algorithm this version has no script for.
    pub(crate) fn of(algorithm: &Algorithm) -> Option<Self> {
        Some(match algorithm {
            Algorithm::FixedWindow(_) => Self::FixedWindow,
            Algorithm::SlidingLog(_) | Algorithm::SlidingWindow(_) => Self::Sliding,
            Algorithm::WeightedWindow(_) => Self::Weighted,
            Algorithm::TokenBucket(_) => Self::TokenBucket,
            Algorithm::LeakyBucket(_) => Self::LeakyBucket,
            Algorithm::Gcra(_) => Self::Gcra,
            Algorithm::LeakyQueue(_) => Self::LeakyQueue,
            Algorithm::Concurrency(_) => Self::Concurrency,
            _ => return None,
        })
    }

    /// The tag as the Lua side spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::FixedWindow => "fw",
            Self::Sliding => "sl",
            Self::Weighted => "ww",
            Self::TokenBucket => "tb",
            Self::LeakyBucket => "lb",
            Self::Gcra => "gc",
            Self::LeakyQueue => "lq",
            Self::Concurrency => "cc",
        }
    }
}

macro_rules! lua {
    ($($file:literal),*) => {
        concat!($(include_str!(concat!("../lua/", $file)), "\n"),*)
    };
}

macro_rules! single {
    ($algorithm:literal) => {
        lua!(
            "base.lua",
            "fast.lua",
            "single_fast.lua",
            "prelude.lua",
            "record.lua",
            $algorithm,
            "step.lua",
            "single.lua"
        )
    };
}

/// The source of the multi-limit script (every algorithm).
pub(crate) const MULTI_SOURCE: &str = lua!(
    "base.lua",
    "prelude.lua",
    "record.lua",
    "fixed_window.lua",
    "sliding.lua",
    "weighted_window.lua",
    "token_bucket.lua",
    "leaky_bucket.lua",
    "gcra.lua",
    "leaky_queue.lua",
    "concurrency.lua",
    "step.lua",
    "multi.lua"
);

/// The source of the batch script (every algorithm).
pub(crate) const BATCH_SOURCE: &str = lua!(
    "base.lua",
    "fast.lua",
    "prelude.lua",
    "record.lua",
    "fixed_window.lua",
    "sliding.lua",
    "weighted_window.lua",
    "token_bucket.lua",
    "leaky_bucket.lua",
    "gcra.lua",
    "leaky_queue.lua",
    "concurrency.lua",
    "step.lua",
    "batch.lua"
);

struct Scripts {
    single: [Script; 8],
    multi: Script,
    batch: Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    single: [
        Script::new(single!("fixed_window.lua")),
        Script::new(single!("sliding.lua")),
        Script::new(single!("weighted_window.lua")),
        Script::new(single!("token_bucket.lua")),
        Script::new(single!("leaky_bucket.lua")),
        Script::new(single!("gcra.lua")),
        Script::new(single!("leaky_queue.lua")),
        Script::new(single!("concurrency.lua")),
    ],
    multi: Script::new(MULTI_SOURCE),
    batch: Script::new(BATCH_SOURCE),
});

/// The script of one operation under `tag`'s algorithm.
pub(crate) fn single(tag: Tag) -> &'static Script {
    let scripts = &*SCRIPTS;
    match tag {
        Tag::FixedWindow => &scripts.single[0],
        Tag::Sliding => &scripts.single[1],
        Tag::Weighted => &scripts.single[2],
        Tag::TokenBucket => &scripts.single[3],
        Tag::LeakyBucket => &scripts.single[4],
        Tag::Gcra => &scripts.single[5],
        Tag::LeakyQueue => &scripts.single[6],
        Tag::Concurrency => &scripts.single[7],
    }
}

/// The script of several limits at once.
pub(crate) fn multi() -> &'static Script {
    &SCRIPTS.multi
}

/// The script of a batch of single operations.
pub(crate) fn batch() -> &'static Script {
    &SCRIPTS.batch
}
