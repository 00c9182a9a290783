//! Extractors that reject with [`ApiError`] instead of axum's plain-text
//! rejections, so malformed input always gets the JSON error body.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use raftlock_core::SessionId;
use raftlock_node::Consistency;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::error::ApiError;

/// A JSON request body. Requires `Content-Type: application/json` (or an
/// `application/*+json` type), honours the router's body limit, and
/// rejects unknown fields where the target type says so.
pub(crate) struct JsonBody<T>(pub T);

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json"))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers()) {
            return Err(ApiError::unsupported_media_type());
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large("the request body is over the configured limit")
            } else {
                ApiError::bad_request(format!(
                    "could not read the request body: {}",
                    rejection.body_text()
                ))
            }
        })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
    }
}

/// Path parameters; a parameter that does not decode is `bad_request`.
pub(crate) struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| ApiPath(value))
            .map_err(|r| ApiError::bad_request(format!("invalid path: {}", r.body_text())))
    }
}

/// Query parameters; unknown or malformed parameters are `bad_request`.
pub(crate) struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| ApiQuery(value))
            .map_err(|r| ApiError::bad_request(format!("invalid query: {}", r.body_text())))
    }
}

/// A session id from a path or body. Text that is not 32 hex digits can
/// never name a session, so it is `session_not_found`, like any other
/// unknown session (docs/api.md: an unknown session wins over other errors).
pub(crate) fn parse_session(text: &str) -> Result<SessionId, ApiError> {
    text.parse().map_err(|_| {
        let shown: String = text.chars().take(64).collect();
        ApiError::session_not_found(format!("{shown:?} (a session id is 32 hex digits)"))
    })
}

/// `?consistency=linearizable|stale` (default linearizable).
#[derive(Debug, Clone, Copy, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ReadConsistency {
    #[default]
    Linearizable,
    Stale,
}

impl From<ReadConsistency> for Consistency {
    fn from(c: ReadConsistency) -> Self {
        match c {
            ReadConsistency::Linearizable => Consistency::Linearizable,
            ReadConsistency::Stale => Consistency::Stale,
        }
    }
}

/// The query of read endpoints that take nothing but a consistency.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ReadQuery {
    /// `linearizable` (default: a read-index barrier first) or `stale`
    /// (this member's replica as it is).
    #[serde(default)]
    pub consistency: ReadConsistency,
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn json_content_types() {
        let check = |value: Option<&'static str>| {
            let mut headers = HeaderMap::new();
            if let Some(v) = value {
                headers.insert(CONTENT_TYPE, HeaderValue::from_static(v));
            }
            is_json(&headers)
        };
        assert!(check(Some("application/json")));
        assert!(check(Some("Application/JSON; charset=utf-8")));
        assert!(check(Some("application/merge-patch+json")));
        assert!(!check(Some("text/plain")));
        assert!(!check(Some("application/jsonx")));
        assert!(!check(None));
    }

    #[test]
    fn session_ids() {
        assert!(parse_session("0123456789abcdef0123456789abcdef").is_ok());
        let err = parse_session("xyz").expect_err("not hex");
        assert_eq!(err.code(), "session_not_found");
    }
}
