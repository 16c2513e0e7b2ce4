//! [`KeyExtractor`]: the role of whatever turns a request into the parts of its key. The
//! built-in [`KeyBy`](crate::KeyBy) is one; implement the trait for keys of your own (a
//! tenant from a verified token, an API key's account). Runs after a policy matched a
//! request and before the limiter is asked; the policy's name namespaces the parts, and
//! they are escaped and bounded when they become a store key, so an extractor may return
//! any text a client sent.
//!
//! Three answers, three meanings: a key (limit the request under it), no key (the policy
//! does not apply to this request, e.g. an anonymous one under a per-user limit), or an
//! error (the key *should* exist but cannot be built: the layer refuses the request with
//! `503`, fail closed, and logs the reason, never letting it through unlimited).

use std::sync::Arc;

use http::request::Parts;

/// The parts of one request's key: `(name, value)` pairs, e.g. `("tenant", "acme")`.
///
/// ```
/// use weir_tower::KeyParts;
///
/// let key = KeyParts::new("tenant", "acme").and("plan", "free");
/// assert_eq!(key.entries(), [("tenant".into(), "acme".into()), ("plan".into(), "free".into())]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyParts(Vec<(String, String)>);

impl KeyParts {
    /// A key of one part.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self(vec![(name.into(), value.into())])
    }

    /// Adds a part.
    #[must_use]
    pub fn and(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.0.push((name.into(), value.into()));
        self
    }

    /// The parts, in order.
    pub fn entries(&self) -> &[(String, String)] {
        &self.0
    }

    /// The parts, owned.
    pub fn into_entries(self) -> Vec<(String, String)> {
        self.0
    }
}

impl From<Vec<(String, String)>> for KeyParts {
    fn from(entries: Vec<(String, String)>) -> Self {
        Self(entries)
    }
}

/// A key that should exist but cannot be built: the layer refuses the request (`503`, fail
/// closed) and logs the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key needs the TCP peer's address and the server did not record it.
    #[error(
        "the request carries no peer address: serve the app with \
         into_make_service_with_connect_info::<SocketAddr>() (or insert the peer's SocketAddr \
         into the request's extensions)"
    )]
    NoPeerAddress,
    /// A custom extractor's reason.
    #[error("{0}")]
    Other(String),
}

impl KeyError {
    /// An error with a reason of your own (it is logged, not sent to the client).
    pub fn new(reason: impl Into<String>) -> Self {
        Self::Other(reason.into())
    }
}

/// Turns a request into the parts of its key.
///
/// ```
/// use http::request::Parts;
/// use weir_core::Rule;
/// use weir_tower::{KeyBy, KeyError, KeyExtractor, KeyParts, Policy};
///
/// /// The tenant of an API key `tenant.secret`; a key without a dot is malformed.
/// struct Tenant;
///
/// impl KeyExtractor for Tenant {
///     fn extract(&self, request: &Parts) -> Result<Option<KeyParts>, KeyError> {
///         let Some(api_key) = request.headers.get("x-api-key") else {
///             return Ok(None); // anonymous: this policy does not apply
///         };
///         let api_key = api_key.to_str().map_err(|_| KeyError::new("x-api-key is not text"))?;
///         match api_key.split_once('.') {
///             Some((tenant, _secret)) => Ok(Some(KeyParts::new("tenant", tenant))),
///             None => Err(KeyError::new("x-api-key is not tenant.secret")),
///         }
///     }
/// }
///
/// let per_tenant = Policy::new("per_tenant", Rule::per_second(100)?)?.key(KeyBy::custom(Tenant));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of `request`: `Ok(Some(parts))` to limit it under that key, `Ok(None)` when
    /// the policy does not apply to it, `Err` when the key cannot be built (the request is
    /// refused, fail closed).
    fn extract(&self, request: &Parts) -> Result<Option<KeyParts>, KeyError>;
}

impl<E: KeyExtractor + ?Sized> KeyExtractor for Arc<E> {
    fn extract(&self, request: &Parts) -> Result<Option<KeyParts>, KeyError> {
        (**self).extract(request)
    }
}

impl<E: KeyExtractor + ?Sized> KeyExtractor for Box<E> {
    fn extract(&self, request: &Parts) -> Result<Option<KeyParts>, KeyError> {
        (**self).extract(request)
    }
}
