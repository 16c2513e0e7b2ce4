//! [`Shared`]: what every service of one layer shares, behind one `Arc`. Built by the layer
//! (`layer.rs`), read by each service (`service.rs`) for every request.

use std::sync::Arc;

use crate::in_flight::InFlight;
use crate::limits::Limits;
use crate::refused::RefusalFn;
use crate::waiters::Waiters;
use weir_names::HeaderStyle;

/// What every service of one layer shares.
pub(crate) struct Shared {
    pub(crate) limits: Arc<dyn Limits>,
    pub(crate) headers: HeaderStyle,
    pub(crate) in_flight: Option<InFlight>,
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) on_refusal: Option<RefusalFn>,
}
