//! # weir-redis
//!
//! (docs in progress)

mod batch;
mod builder;
mod connection;
mod encode;
mod error;
mod exec;
mod keys;
mod reply;
mod scripts;
mod store;
mod url;

pub use builder::{RedisStoreBuilder, TimeSource};
pub use encode::MAX_SPAN;
pub use error::BuildError;
pub use store::RedisStore;
