//! [`Shared`]: what every service of one layer shares, behind one `Arc`. Built by the layer
//! (`layer.rs`), read by each service (`service.rs`) for every request.

use std::sync::Arc;

use crate::gate::Gate;
use crate::limits::Limits;
use crate::refused::RefusalFn;
use crate::waiters::Waiters;

/// A request's priority at the in-flight gate, from its head.
pub(crate) type PriorityFn = Arc<dyn Fn(&http::request::Parts) -> u8 + Send + Sync>;
use weir_names::HeaderStyle;

/// What every service of one layer shares.
pub(crate) struct Shared {
    pub(crate) limits: Arc<dyn Limits>,
    pub(crate) headers: HeaderStyle,
    pub(crate) in_flight: Option<Arc<Gate>>,
    /// Each request's priority at the in-flight gate (higher first; none: all 0).
    pub(crate) priority: Option<PriorityFn>,
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) on_refusal: Option<RefusalFn>,
}
