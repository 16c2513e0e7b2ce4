//! Errors. A denial is not an error: it is a [`Decision`](crate::Decision) with
//! `allowed == false`. An `Err` means Weir could not decide: a bad rule, a bad key, a cost
//! that can never fit, or a store that failed.

/// A rule's parameters are invalid. Raised when the rule is built, never at check time.
/// The message names the parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// A parameter that must be positive is zero.
    #[error("{param} must be greater than zero")]
    Zero {
        /// The parameter's name, e.g. `limit` or `window`.
        param: &'static str,
    },
    /// A parameter is above what the algorithm supports.
    #[error("{param} is {value}, above the maximum of {max}")]
    TooLarge {
        /// The parameter's name.
        param: &'static str,
        /// The value given.
        value: u64,
        /// The largest value accepted.
        max: u64,
    },
    /// The precision of a sliding window counter does not divide its window.
    #[error("precision ({precision_ns} ns) must divide the window ({window_ns} ns) evenly")]
    PrecisionDoesNotDivideWindow {
        /// The bucket width in nanoseconds.
        precision_ns: u64,
        /// The window length in nanoseconds.
        window_ns: u64,
    },
    /// Two parameters contradict each other.
    #[error("{param}: {reason}")]
    Inconsistent {
        /// The parameter's name.
        param: &'static str,
        /// Why it does not fit with the others.
        reason: &'static str,
    },
}

/// A key is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key is empty.
    #[error("key is empty")]
    Empty,
    /// The key is longer than [`Key::MAX_LEN`](crate::Key::MAX_LEN) bytes.
    #[error("key is {len} bytes, above the maximum of {max}")]
    TooLong {
        /// The key's length in bytes.
        len: usize,
        /// The maximum length in bytes.
        max: usize,
    },
}

/// A store could not run a step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The memory store is at capacity (or the rule at its share of it) and the records it
    /// could evict are all limited, blocked or locked out. New keys are refused until some
    /// expire; the caller's failure policy decides what that means.
    #[error(
        "memory store is full: {capacity} keys, none evictable without resetting a limited key"
    )]
    Full {
        /// The configured capacity in keys.
        capacity: usize,
    },
    /// The store failed: refused, reset, an error reply (network stores).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store did not answer within the configured timeout.
    #[error("store timed out after {timeout_ms} ms")]
    Timeout {
        /// The timeout that passed.
        timeout_ms: u64,
    },
    /// The store holds a record this version cannot read (corrupt or from another version).
    #[error("store returned an unreadable record: {0}")]
    Corrupt(String),
}

/// Why a check could not be decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The cost can never be allowed by this rule, whatever the state: it is above the
    /// rule's capacity. Distinct from a denial, which would pass later.
    #[error("cost {cost} is above the rule's capacity of {capacity}; it can never be allowed")]
    CostAboveCapacity {
        /// The cost asked for.
        cost: u64,
        /// The most one request can ever use under this rule.
        capacity: u64,
    },
    /// The operation does not apply to this rule's algorithm, e.g. `acquire` on a token
    /// bucket, or a plain check on concurrency leases.
    #[error("{op} is not supported by the {algorithm} algorithm")]
    Unsupported {
        /// The operation.
        op: &'static str,
        /// The rule's algorithm.
        algorithm: &'static str,
    },
    /// An argument of the operation is invalid.
    #[error("{param} {reason}")]
    Invalid {
        /// The argument's name.
        param: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The key was rejected.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
