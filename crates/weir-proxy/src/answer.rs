//! The body of every answer `weir proxy` gives, [`ProxyBody`]: on the way back to the
//! client, after [`Forward`](crate::Forward), the layer or the screen. Either the
//! upstream's response body ([`UpstreamBody`]: the pooled connection's, under its idle
//! timeout, `body.rs`), streamed, or the proxy's own answer (`reply.rs`, the layer's `429`
//! / `503`), whole. One enum instead of a boxed body: the listener writes it as it is.

use axum::BoxError;
use http_body_util::Full;
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::body::Watched;
use crate::pool::PooledBody;
use crate::upstream::Upstream;

/// The upstream's response body, cut when it stalls.
pub(crate) type UpstreamBody = Watched<PooledBody, Upstream>;

/// The body of an upstream's answer on a connection of its own (an upgrade it declined:
/// `tunnel.rs`), cut when it stalls.
pub(crate) type DirectBody = Watched<Incoming, Upstream>;

/// The body of every answer `weir proxy` gives ([`Forward`](crate::Forward)'s, the
/// layer's and the screen's): the upstream's, streamed and cut when it stalls, or the
/// proxy's own (a `502`, a `429`, …), whole. Not boxed: the listener writes it as it is.
#[derive(Debug)]
pub struct ProxyBody(Kind);

/// What a [`ProxyBody`] holds.
#[derive(Debug)]
enum Kind {
    Own(Full<Bytes>),
    Upstream(UpstreamBody),
    Direct(DirectBody),
}

impl ProxyBody {
    /// The proxy's own answer's body.
    pub(crate) fn own(body: Full<Bytes>) -> Self {
        Self(Kind::Own(body))
    }

    /// The upstream's answer's body.
    pub(crate) fn upstream(body: UpstreamBody) -> Self {
        Self(Kind::Upstream(body))
    }

    /// The body of an answer from a connection of its own.
    pub(crate) fn direct(body: DirectBody) -> Self {
        Self(Kind::Direct(body))
    }

    /// No body (a `101`: what follows is the tunnel's).
    pub(crate) fn empty() -> Self {
        Self::own(Full::new(Bytes::new()))
    }
}

impl hyper::body::Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.get_mut().0 {
            Kind::Own(body) => Pin::new(body)
                .poll_frame(cx)
                .map_err(|never| match never {}),
            Kind::Upstream(body) => Pin::new(body).poll_frame(cx).map_err(BoxError::from),
            Kind::Direct(body) => Pin::new(body).poll_frame(cx).map_err(BoxError::from),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Kind::Own(body) => body.is_end_stream(),
            Kind::Upstream(body) => body.is_end_stream(),
            Kind::Direct(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Kind::Own(body) => body.size_hint(),
            Kind::Upstream(body) => body.size_hint(),
            Kind::Direct(body) => body.size_hint(),
        }
    }
}

/// The layer's own answers (`429`, `503`) in the proxy's body.
impl weir_tower::RefusalBody for ProxyBody {
    fn from_text(text: String) -> Self {
        Self::own(Full::new(Bytes::from(text)))
    }
}
