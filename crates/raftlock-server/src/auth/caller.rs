//! Who is calling, and the checks handlers make with it: session
//! ownership (a session belongs to the principal that opened it) and what
//! listings may show.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use raftlock_core::SessionId;
use raftlock_node::Consistency;

use crate::error::ApiError;
use crate::extract::parse_session;
use crate::state::AppState;
use raftlock_api::auth::{Permission, Token};

/// The authenticated caller of a request, put in its extensions by the
/// `authenticate` middleware.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// The API runs without tokens: everything is allowed and sessions
    /// have no principal.
    Open,
    /// A request with a valid bearer token.
    Token(Arc<Token>),
}

impl Caller {
    /// The principal sessions opened by this caller belong to.
    pub fn principal(&self) -> Option<&str> {
        match self {
            Caller::Open => None,
            Caller::Token(token) => Some(&token.name),
        }
    }

    /// May act on and see every session (no tokens, or a cluster admin).
    pub fn sees_every_session(&self) -> bool {
        match self {
            Caller::Open => true,
            Caller::Token(token) => token.is_cluster_admin(),
        }
    }

    /// May do `permission` on `name`?
    pub fn may(&self, permission: Permission, name: &str) -> bool {
        match self {
            Caller::Open => true,
            Caller::Token(token) => token.allows(permission, name),
        }
    }

    /// `403 forbidden` unless the caller may do `permission` on `name`.
    pub fn require(&self, permission: Permission, name: &str) -> Result<(), ApiError> {
        if self.may(permission, name) {
            return Ok(());
        }
        Err(self.forbidden(format!("{} on {name:?}", permission.as_str())))
    }

    /// `403 forbidden` unless the caller is a cluster admin.
    pub fn require_cluster_admin(&self) -> Result<(), ApiError> {
        if self.sees_every_session() {
            return Ok(());
        }
        Err(self.forbidden("admin on the prefix \"\" (cluster admin)".into()))
    }

    fn forbidden(&self, needed: String) -> ApiError {
        let who = self.principal().unwrap_or_default();
        ApiError::forbidden(format!("token {who:?} lacks the permission {needed}"))
    }

    /// What this caller may see of a session opened by `principal`.
    pub fn visibility(&self, principal: Option<&str>) -> Visibility {
        if self.sees_every_session() || principal == self.principal() {
            Visibility::Full
        } else {
            Visibility::Redacted
        }
    }

    /// `403 forbidden` unless the session is the caller's (or the caller
    /// sees every session). An unknown session is `404
    /// session_not_found`, as the operation itself would answer.
    ///
    /// The principal of a session never changes, so this replica's state
    /// answers whenever it has applied the open; only a session it has not
    /// seen yet costs a linearizable read.
    pub async fn require_session(&self, app: &AppState, id: SessionId) -> Result<(), ApiError> {
        if self.sees_every_session() {
            return Ok(());
        }
        let mut owner = app.node.session_principal(id, Consistency::Stale).await?;
        if owner.is_none() {
            owner = app
                .node
                .session_principal(id, Consistency::Linearizable)
                .await?;
        }
        match owner {
            None => Err(ApiError::session_not_found(id)),
            Some(owner) if owner.as_deref() == self.principal() => Ok(()),
            Some(_) => Err(ApiError::forbidden(format!(
                "session {id} belongs to another principal"
            ))),
        }
    }

    /// The session a request names (`text`, as the client sent it), once
    /// the caller may act for it: `404 session_not_found` for a malformed
    /// or unknown id, `403 forbidden` for another principal's.
    pub async fn own_session(&self, app: &AppState, text: &str) -> Result<SessionId, ApiError> {
        let id = parse_session(text)?;
        self.require_session(app, id).await?;
        Ok(id)
    }

    /// Whether a listing may show a name: the caller reads it.
    pub fn reads(&self) -> impl Fn(&str) -> bool + '_ {
        move |name| self.may(Permission::Read, name)
    }
}

/// How much of another principal's session a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Visibility {
    /// Everything, the session id included.
    Full,
    /// The session id is `null`: it is the only credential a session has.
    Redacted,
}

impl Visibility {
    /// The session id as a listing shows it.
    pub fn session_id(self, id: SessionId) -> Option<String> {
        match self {
            Visibility::Full => Some(id.to_string()),
            Visibility::Redacted => None,
        }
    }

    /// A session id of the contract's views as a listing shows it.
    pub fn redact(self, id: Option<String>) -> Option<String> {
        match self {
            Visibility::Full => id,
            Visibility::Redacted => None,
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        // The middleware runs before every route; a missing caller is a
        // bug, and must not mean "allowed".
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            ApiError::from(raftlock_node::NodeError::Internal(
                "request reached a handler without authentication".into(),
            ))
        })
    }
}
