//! Reading a JSON request body into a type, with a 400 that names the field at fault
//! (`invalid JSON at descriptors[0].entries[1].value: invalid type: integer, expected a
//! string`). The size limit is enforced before this, by the router's body limit.
//!
//! A well-formed body is read once, by plain `serde_json` (no path tracking: this is on
//! every decision's path); only a body that fails is read again to say where.

use axum::body::Bytes;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// Parses `bytes` as `T`, or says where and why not.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ApiError> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(_) => explain(bytes),
    }
}

/// Parses `bytes` again, tracking the path, for the error message (or, should the two
/// parsers ever disagree, the value).
fn explain<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." || path == "?" {
            ApiError::bad_request(format!("invalid JSON: {inner}"))
        } else {
            ApiError::bad_request(format!("invalid JSON at {path}: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    Ok(value)
}
