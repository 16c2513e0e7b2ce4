//! The Lua scripts, assembled once at load time from `lua/*.lua`, in two forms from the
//! same files:
//!
//! - **A Redis 7 function library** (`FUNCTION LOAD`, called by `FCALL`): every algorithm
//!   and three entry points, one operation (`single_fast.lua` then `single.lua`), a batch
//!   (`batch.lua`) and several limits at once (`multi.lua`), each wrapped as a function
//!   of `(KEYS, ARGV)`. The library is built once per server, so a call runs only its
//!   entry point. Its name carries a hash of its text (`weir_<16 hex>`), so versions that
//!   share a server never replace each other's functions.
//! - **`EVALSHA` scripts**, for a server without functions (Redis 6.2): one per
//!   algorithm for a single operation (base, that algorithm's shared part, the fast path
//!   and its head, then the general path: prelude, record, that algorithm's module, step,
//!   `single.lua`), one with every algorithm for several limits and one for a batch.
//!   `EVALSHA` runs the whole chunk on every call and each function it defines is a
//!   closure built per call, so the fast path and the single script's head come before
//!   the general path's definitions: a call the fast path answers returns before building
//!   any of them.
//!
//! Each algorithm exists once in Lua: its file's first part (up to the `-- @general` line)
//! is the step over plain numbers that the fast path (`fast.lua`, which holds no algorithm)
//! and the general path both call; the rest is the general path's module around it. The
//! first part goes before `fast.lua`, the rest after the prelude.
//!
//! Each form also exists without the fast path ([`Path::General`]), so that the
//! conformance suite checks the general path alone on every algorithm.

use std::sync::LazyLock;

use redis::Script;
use weir_core::{Algorithm, Rule};
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
    /// GCRA with warm-up (`lua/warmup.lua` around `gcra.lua`).
    GcraWarm,
    /// The token bucket with warm-up.
    TokenBucketWarm,
}

impl Tag {
    /// The tag of a rule's algorithm; `None` for an algorithm this version has no script for.
    pub(crate) fn of(rule: &Rule) -> Option<Self> {
        let warm = rule.warmup().is_some();
        Some(match rule.algorithm() {
            Algorithm::FixedWindow(_) => Self::FixedWindow,
            Algorithm::SlidingLog(_) | Algorithm::SlidingWindow(_) => Self::Sliding,
            Algorithm::WeightedWindow(_) => Self::Weighted,
            Algorithm::TokenBucket(_) if warm => Self::TokenBucketWarm,
            Algorithm::TokenBucket(_) => Self::TokenBucket,
            Algorithm::LeakyBucket(_) => Self::LeakyBucket,
            Algorithm::Gcra(_) if warm => Self::GcraWarm,
            Algorithm::Gcra(_) => Self::Gcra,
            Algorithm::LeakyQueue(_) => Self::LeakyQueue,
            Algorithm::Concurrency(_) => Self::Concurrency,
            _ => return None,
        })
    }

    /// Every tag, in [`Tag::index`] order.
    const ALL: [Tag; 10] = [
        Self::FixedWindow,
        Self::Sliding,
        Self::Weighted,
        Self::TokenBucket,
        Self::LeakyBucket,
        Self::Gcra,
        Self::LeakyQueue,
        Self::Concurrency,
        Self::GcraWarm,
        Self::TokenBucketWarm,
    ];

    /// The files of the tag's algorithm, as positions in [`ALGORITHMS`]: its own, and for a
    /// warm-up the plain algorithm's before `warmup.lua`.
    fn files(self) -> &'static [usize] {
        match self {
            Self::GcraWarm => &[5, 8],
            Self::TokenBucketWarm => &[3, 8],
            _ => std::slice::from_ref(&[0, 1, 2, 3, 4, 5, 6, 7][self.index()]),
        }
    }

    /// The tag's position in [`Tag::ALL`] (and its single script's in `Scripts`).
    fn index(self) -> usize {
        match self {
            Self::FixedWindow => 0,
            Self::Sliding => 1,
            Self::Weighted => 2,
            Self::TokenBucket => 3,
            Self::LeakyBucket => 4,
            Self::Gcra => 5,
            Self::LeakyQueue => 6,
            Self::Concurrency => 7,
            Self::GcraWarm => 8,
            Self::TokenBucketWarm => 9,
        }
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
            Self::GcraWarm => "gw",
            Self::TokenBucketWarm => "tw",
        }
    }
}

macro_rules! lua {
    ($file:literal) => {
        include_str!(concat!("../lua/", $file))
    };
}

const BASE: &str = lua!("base.lua");
const FAST: &str = lua!("fast.lua");
/// The fast path of [`Path::General`]: it never answers.
const NO_FAST: &str = "local function FAST() return nil end";
const SINGLE_FAST: &str = lua!("single_fast.lua");
const PRELUDE: &str = lua!("prelude.lua");
const RECORD: &str = lua!("record.lua");
const STEP: &str = lua!("step.lua");
const SINGLE: &str = lua!("single.lua");
const MULTI: &str = lua!("multi.lua");
const BATCH: &str = lua!("batch.lua");

/// Every algorithm's file, in [`Tag::index`] order, then the warm-up's (all general
/// module: it wraps GCRA's and the token bucket's).
const ALGORITHMS: [&str; 9] = [
    lua!("fixed_window.lua"),
    lua!("sliding.lua"),
    lua!("weighted_window.lua"),
    lua!("token_bucket.lua"),
    lua!("leaky_bucket.lua"),
    lua!("gcra.lua"),
    lua!("leaky_queue.lua"),
    lua!("concurrency.lua"),
    lua!("warmup.lua"),
];

/// The line that ends an algorithm file's shared part.
const GENERAL: &str = "\n-- @general\n";

/// An algorithm file as (its shared part, its general module); a file without the
/// `-- @general` line is all general module.
fn parts(file: &str) -> (&str, &str) {
    file.split_once(GENERAL).unwrap_or(("", file))
}

/// Whether a script tries the fast path before the general one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Path {
    /// The fast path first (what a store runs).
    #[default]
    Fast,
    /// The general path alone (what the conformance suite also checks).
    General,
}

/// What a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// One operation under the tag's algorithm (`single_fast.lua`, `single.lua`).
    One(Tag),
    /// A batch of operations (`batch.lua`).
    Batch,
    /// Several limits at once (`multi.lua`).
    Multi,
}

/// The scripts of one [`Path`], in both forms.
pub(crate) struct Scripts {
    single: [Source; 10],
    batch: Source,
    multi: Source,
    library: String,
    /// The functions of the one, batch and multi entry points.
    functions: [String; 3],
}

/// An `EVALSHA` script: its text (for `SCRIPT LOAD`) and its hash.
pub(crate) struct Source {
    pub(crate) text: String,
    pub(crate) hash: String,
}

impl Source {
    fn new(text: String) -> Self {
        let hash = Script::new(&text).get_hash().to_owned();
        Self { text, hash }
    }
}

impl Scripts {
    /// The `EVALSHA` script of `entry`.
    pub(crate) fn script(&self, entry: Entry) -> &Source {
        match entry {
            Entry::One(tag) => &self.single[tag.index()],
            Entry::Batch => &self.batch,
            Entry::Multi => &self.multi,
        }
    }

    /// The library function of `entry` (for `FCALL`).
    pub(crate) fn function(&self, entry: Entry) -> &str {
        let [one, batch, multi] = &self.functions;
        match entry {
            Entry::One(_) => one,
            Entry::Batch => batch,
            Entry::Multi => multi,
        }
    }

    /// The library's source, as `FUNCTION LOAD` takes it.
    pub(crate) fn library(&self) -> &str {
        &self.library
    }
}

fn build(path: Path) -> Scripts {
    let fast = match path {
        Path::Fast => FAST,
        Path::General => NO_FAST,
    };
    let join = |pieces: &[&str]| pieces.join("\n");
    let cores: Vec<&str> = ALGORITHMS.iter().map(|f| parts(f).0).collect();
    let cores = join(&cores);
    let generals: Vec<&str> = ALGORITHMS.iter().map(|f| parts(f).1).collect();
    let generals = join(&generals);
    let single = Tag::ALL.map(|tag| {
        let files = tag.files().iter().filter_map(|&i| ALGORITHMS.get(i));
        let (core, general): (Vec<&str>, Vec<&str>) = files.map(|f| parts(f)).unzip();
        Source::new(join(&[
            BASE,
            &join(&core),
            fast,
            SINGLE_FAST,
            PRELUDE,
            RECORD,
            &join(&general),
            STEP,
            SINGLE,
        ]))
    });
    let batch = join(&[BASE, &cores, fast, PRELUDE, RECORD, &generals, STEP, BATCH]);
    let multi = join(&[BASE, &cores, PRELUDE, RECORD, &generals, STEP, MULTI]);
    let wrap = |name: &str, body: &[&str]| {
        format!(
            "local function {name}(KEYS, ARGV)\n{}\nend",
            body.join("\n")
        )
    };
    let body = join(&[
        BASE,
        &cores,
        fast,
        PRELUDE,
        RECORD,
        &generals,
        STEP,
        &wrap("ONE", &[SINGLE_FAST, SINGLE]),
        &wrap("BATCH", &[BATCH]),
        &wrap("MULTI", &[MULTI]),
    ]);
    let hash = Script::new(&body).get_hash().to_owned();
    let name = format!("weir_{}", hash.get(..16).unwrap_or(&hash));
    let functions = [
        format!("{name}_one"),
        format!("{name}_batch"),
        format!("{name}_multi"),
    ];
    let library = format!(
        "#!lua name={name}\n{body}\n\
         redis.register_function('{}', ONE)\n\
         redis.register_function('{}', BATCH)\n\
         redis.register_function('{}', MULTI)\n",
        functions[0], functions[1], functions[2]
    );
    Scripts {
        single,
        batch: Source::new(batch),
        multi: Source::new(multi),
        library,
        functions,
    }
}

static FAST_SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| build(Path::Fast));
static GENERAL_SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| build(Path::General));

/// The scripts of `path`.
pub(crate) fn scripts(path: Path) -> &'static Scripts {
    match path {
        Path::Fast => &FAST_SCRIPTS,
        Path::General => &GENERAL_SCRIPTS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_fast_algorithms_share_their_step_and_the_rest_have_none() {
        for (i, file) in ALGORITHMS.iter().enumerate() {
            let (core, general) = parts(file);
            let fast = [0, 1, 3, 5].contains(&i);
            assert_eq!(core.contains("FASTS."), fast, "algorithm {i}");
            assert!(general.contains("ALG."), "algorithm {i}");
            assert_eq!(file.matches(GENERAL).count(), usize::from(fast));
        }
        // No algorithm is written in the fast path: it only calls the adapters.
        assert!(!FAST.contains("p.interval") && !FAST.contains("p.window"));
    }

    #[test]
    fn the_library_names_its_functions_after_its_hash() {
        let scripts = scripts(Path::Fast);
        let name = scripts.function(Entry::Batch).trim_end_matches("_batch");
        assert!(scripts
            .library()
            .starts_with(&format!("#!lua name={name}\n")));
        assert_eq!(name.len(), "weir_".len() + 16);
        let general = super::scripts(Path::General);
        assert_ne!(
            general.function(Entry::Multi),
            scripts.function(Entry::Multi)
        );
        assert_ne!(
            general.script(Entry::One(Tag::Gcra)).hash,
            scripts.script(Entry::One(Tag::Gcra)).hash
        );
    }
}
