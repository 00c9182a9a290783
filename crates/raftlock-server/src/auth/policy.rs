//! The route table of permissions, enforced before any handler runs.
//!
//! Every request but `/v1/health`, `/metrics`, `/v1/openapi.json` and the dashboard's static
//! files (`/ui/…`) needs a valid bearer
//! token (`401 unauthorized`), whichever route it names, so an unknown
//! route says nothing to a caller without one. Routes that name a lock,
//! election or node need a permission on that name (`403 forbidden`);
//! what needs the body or the state (whose session is it, which lines of
//! a listing may be shown) is checked by the handlers with the
//! [`Caller`] this leaves in the request.
//!
//! Names are taken from the raw request path, before percent-decoding.
//! That is sound because grant prefixes cannot contain `%`
//! (`tokens.rs`): decoding only rewrites `%XX` sequences, so a raw path
//! that starts with a prefix decodes to a name that starts with it too,
//! and one that does not can only be refused, never let through.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::caller::Caller;
use crate::error::ApiError;
use raftlock_api::auth::{AuthConfig, Permission, Token};

/// The token table the middleware checks against; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Tokens {
    config: Arc<AuthConfig>,
    /// The same tokens, shared with every request's [`Caller`].
    shared: Arc<[Arc<Token>]>,
}

impl Tokens {
    pub fn new(config: &AuthConfig) -> Self {
        Tokens {
            shared: config.tokens.iter().cloned().map(Arc::new).collect(),
            config: Arc::new(config.clone()),
        }
    }
}

/// What a route needs.
#[derive(Debug, PartialEq, Eq)]
enum Need {
    /// Readable by anyone who can reach the port.
    Nothing,
    /// Any valid token; the handler may check more.
    Token,
    /// The permission on this name.
    Name(Permission, String),
    /// The permission on some prefix (opening a session).
    Anywhere(Permission),
    /// `admin` on the empty prefix.
    ClusterAdmin,
}

/// `name/action` → `name` (as `locks::split_action`).
fn without_action(rest: &str) -> &str {
    rest.rsplit_once('/').map_or("", |(name, _)| name)
}

fn need(method: &Method, path: &str) -> Need {
    let reading = method == Method::GET || method == Method::HEAD;
    // The dashboard's static files hold no data (`ui.rs`).
    let dashboard = path == "/ui" || path.starts_with("/ui/");
    // The OpenAPI document describes the API, not the cluster's data.
    let public = path == "/v1/health" || path == "/metrics" || path == "/v1/openapi.json";
    if public || dashboard {
        return Need::Nothing;
    }
    if path == "/v1/sessions" && method == Method::POST {
        return Need::Anywhere(Permission::Lock);
    }
    if let Some(rest) = path.strip_prefix("/v1/locks/") {
        if reading {
            return Need::Name(Permission::Read, rest.to_string());
        }
        if method == Method::POST {
            return Need::Name(Permission::Lock, without_action(rest).to_string());
        }
    }
    // Read-write locks and semaphores: as locks. Multi-locks name their
    // locks in the body: any token, and the handler checks each name.
    for prefix in ["/v1/rwlocks/", "/v1/semaphores/"] {
        if let Some(rest) = path.strip_prefix(prefix) {
            if reading {
                return Need::Name(Permission::Read, rest.to_string());
            }
            if method == Method::POST {
                return Need::Name(Permission::Lock, without_action(rest).to_string());
            }
        }
    }
    if let Some(rest) = path.strip_prefix("/v1/elections/") {
        if reading {
            // `GET {name}/observe` streams `name`.
            let name = match rest.rsplit_once('/') {
                Some((name, "observe")) => name,
                _ => rest,
            };
            return Need::Name(Permission::Read, name.to_string());
        }
        if method == Method::POST {
            return Need::Name(Permission::Lock, without_action(rest).to_string());
        }
    }
    if path == "/v1/nodes" && reading {
        return Need::Name(Permission::Read, String::new());
    }
    if let Some(rest) = path.strip_prefix("/v1/nodes/") {
        if reading {
            return Need::Name(Permission::Read, rest.to_string());
        }
        if method == Method::PUT || method == Method::DELETE {
            return Need::Name(Permission::Write, rest.to_string());
        }
    }
    let members_change = (path == "/v1/cluster/members" && method == Method::POST)
        || (path.starts_with("/v1/cluster/members/") && method == Method::DELETE);
    if members_change || path == "/v1/snapshot" {
        return Need::ClusterAdmin;
    }
    Need::Token
}

/// The bearer token of a request, if it sent one in the right form.
fn bearer(request: &Request) -> Result<&str, &'static str> {
    let value = request
        .headers()
        .get(AUTHORIZATION)
        .ok_or("this API needs a bearer token: Authorization: Bearer <token>")?;
    let text = value
        .to_str()
        .map_err(|_| "the Authorization header is not ASCII")?;
    let (scheme, token) = text
        .split_once(' ')
        .ok_or("the Authorization header must be `Bearer <token>`")?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err("the Authorization header must be `Bearer <token>`");
    }
    Ok(token.trim())
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::unauthorized(message).into_response();
    response
        .headers_mut()
        .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Authenticates the request, applies the route table, and leaves the
/// [`Caller`] for the handlers. Without tokens every caller is
/// [`Caller::Open`].
pub(crate) async fn authenticate(
    State(tokens): State<Option<Tokens>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(tokens) = tokens else {
        request.extensions_mut().insert(Caller::Open);
        return next.run(request).await;
    };
    let need = need(request.method(), request.uri().path());
    if need == Need::Nothing {
        return next.run(request).await;
    }
    let presented = match bearer(&request) {
        Ok(token) => token,
        Err(message) => return unauthorized(message),
    };
    let Some(index) = tokens.config.position(presented) else {
        return unauthorized("the bearer token is not valid here (unknown or revoked)");
    };
    let caller = Caller::Token(tokens.shared[index].clone());
    let allowed = match &need {
        Need::Nothing | Need::Token => Ok(()),
        Need::Name(permission, name) => caller.require(*permission, name),
        Need::Anywhere(permission) => match &caller {
            Caller::Token(token) if !token.allows_somewhere(*permission) => {
                Err(ApiError::forbidden(format!(
                    "token {:?} lacks the permission {} on every prefix",
                    token.name,
                    permission.as_str()
                )))
            }
            _ => Ok(()),
        },
        Need::ClusterAdmin => caller.require_cluster_admin(),
    };
    if let Err(error) = allowed {
        return error.into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_family_has_its_need() {
        let name = |p: Permission, n: &str| Need::Name(p, n.to_string());
        let cases = [
            (Method::GET, "/v1/health", Need::Nothing),
            (Method::GET, "/metrics", Need::Nothing),
            (Method::GET, "/v1/openapi.json", Need::Nothing),
            (
                Method::POST,
                "/v1/sessions",
                Need::Anywhere(Permission::Lock),
            ),
            (Method::GET, "/v1/sessions", Need::Token),
            (Method::POST, "/v1/sessions/ab/keepalive", Need::Token),
            (Method::DELETE, "/v1/sessions/ab", Need::Token),
            (Method::GET, "/v1/locks", Need::Token),
            (Method::GET, "/v1/locks/a/b", name(Permission::Read, "a/b")),
            (
                Method::POST,
                "/v1/locks/a/b/acquire",
                name(Permission::Lock, "a/b"),
            ),
            (
                Method::POST,
                "/v1/locks/acquire",
                name(Permission::Lock, ""),
            ),
            (Method::POST, "/v1/fencing/check", Need::Token),
            (
                Method::GET,
                "/v1/elections/e/observe",
                name(Permission::Read, "e"),
            ),
            (Method::GET, "/v1/elections/e", name(Permission::Read, "e")),
            (
                Method::POST,
                "/v1/elections/e/campaign",
                name(Permission::Lock, "e"),
            ),
            (Method::GET, "/v1/nodes", name(Permission::Read, "")),
            (Method::GET, "/v1/nodes/a/b", name(Permission::Read, "a/b")),
            (Method::PUT, "/v1/nodes/a/b", name(Permission::Write, "a/b")),
            (Method::DELETE, "/v1/nodes/a", name(Permission::Write, "a")),
            (Method::GET, "/v1/cluster", Need::Token),
            (Method::GET, "/v1/cluster/members", Need::Token),
            (Method::GET, "/v1/cluster/reachability", Need::Token),
            (Method::GET, "/ui", Need::Nothing),
            (Method::GET, "/ui/app.js", Need::Nothing),
            (Method::GET, "/uix", Need::Token),
            (Method::POST, "/v1/cluster/members", Need::ClusterAdmin),
            (Method::DELETE, "/v1/cluster/members/4", Need::ClusterAdmin),
            (Method::GET, "/v1/snapshot", Need::ClusterAdmin),
            (Method::GET, "/nowhere", Need::Token),
        ];
        for (method, path, expected) in cases {
            assert_eq!(need(&method, path), expected, "{method} {path}");
        }
    }
}
