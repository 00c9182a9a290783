//! Who may do what through the door, when the cluster has bearer tokens
//! (`[[auth.tokens]]`, docs/security.md): the same tokens and grants as
//! the HTTP API. A client authenticates with ZooKeeper's `digest` scheme,
//! `addauth digest <principal>:<token>`; a wrong pair, or any other
//! scheme, is answered AUTHFAILED and the connection closed, as ZooKeeper
//! does. Until then, and outside its grants, a request is answered NOAUTH.
//!
//! A znode's name for the grants is its path without the leading `/`
//! (`/billing/x` is `billing/x`), as for `/v1/nodes`. `exists` and `sync`
//! need only a token (ZooKeeper never checks their ACL). Reads need `read`,
//! creates, deletes, `setData` and `setACL` need `write`; ZooKeeper's own
//! read-only subtree (`/zookeeper/config`, which Curator reads) is open to
//! every authenticated client. Without tokens everything is allowed and
//! credentials are accepted unused.

use raftlock_api::auth::{AuthConfig, Permission, Token};

use super::conn::{Conn, Step};
use super::ops::{failed_multi, in_zk_subtree};
use crate::wire::{xid, AuthPacket, ErrorCode, MultiOp, OpRequest, Request};

/// The one scheme served: the token is the password.
const DIGEST: &str = "digest";

/// What a connection has shown.
#[derive(Debug, Clone)]
pub(crate) enum Access {
    /// The cluster has no tokens: everything is allowed.
    Open,
    /// Tokens are on and none was shown yet.
    Anonymous,
    /// `addauth digest` succeeded with this token.
    Token(Box<Token>),
}

impl Access {
    /// Where a new connection starts.
    pub fn at_connect(auth: &AuthConfig) -> Access {
        if auth.enabled() {
            Access::Anonymous
        } else {
            Access::Open
        }
    }

    /// May this connection do `permission` on the znode at `path`?
    fn allows(&self, permission: Permission, path: &str) -> bool {
        match self {
            Access::Open => true,
            Access::Anonymous => false,
            Access::Token(_) if permission == Permission::Read && in_zk_subtree(path) => true,
            Access::Token(token) => token.allows(permission, name_of(path)),
        }
    }

    fn principal(&self) -> Option<&str> {
        match self {
            Access::Token(token) => Some(&token.name),
            _ => None,
        }
    }
}

/// A znode's name as the grants see it.
fn name_of(path: &str) -> &str {
    path.strip_prefix('/').unwrap_or(path)
}

fn write_or_read(op: &MultiOp) -> (Permission, &str) {
    match op {
        MultiOp::Create(c) | MultiOp::Create2(c) | MultiOp::CreateContainer(c) => {
            (Permission::Write, &c.path)
        }
        MultiOp::CreateTtl(c) => (Permission::Write, &c.path),
        MultiOp::Delete(d) => (Permission::Write, &d.path),
        MultiOp::SetData(s) => (Permission::Write, &s.path),
        MultiOp::Check(c) => (Permission::Read, &c.path),
        MultiOp::GetChildren(r) | MultiOp::GetData(r) => (Permission::Read, &r.path),
    }
}

/// What a request needs beyond being on a live session.
enum Need<'a> {
    /// Nothing (session upkeep), or checked by its own rule (several
    /// paths: multi, setWatches).
    Nothing,
    /// Any token. `exists` and `sync` are never ACL-checked by
    /// ZooKeeper, and recipes walk up the tree with `exists` (kazoo's
    /// `ensure_path` reaches `/`).
    Token,
    /// `permission` on the znode at the path.
    Grant(Permission, &'a str),
}

fn needs(op: &OpRequest) -> Need<'_> {
    use Permission::{Admin, Read, Write};
    let (permission, path): (Permission, &str) = match op {
        OpRequest::Create(c) | OpRequest::Create2(c) | OpRequest::CreateContainer(c) => {
            (Write, c.path.as_str())
        }
        OpRequest::CreateTtl(c) => (Write, c.path.as_str()),
        OpRequest::Delete(d) => (Write, d.path.as_str()),
        OpRequest::SetData(s) => (Write, s.path.as_str()),
        OpRequest::SetAcl(s) => (Write, s.path.as_str()),
        OpRequest::Check(c) => (Read, c.path.as_str()),
        OpRequest::Exists(_) | OpRequest::Sync(_) => return Need::Token,
        OpRequest::GetData(r) | OpRequest::GetChildren(r) | OpRequest::GetChildren2(r) => {
            (Read, r.path.as_str())
        }
        OpRequest::GetAcl(r) | OpRequest::GetEphemerals(r) | OpRequest::GetAllChildrenNumber(r) => {
            (Read, r.path.as_str())
        }
        OpRequest::CheckWatches(w) | OpRequest::RemoveWatches(w) => (Read, w.path.as_str()),
        OpRequest::AddWatch(w) => (Read, w.path.as_str()),
        // Membership belongs to cluster admins (`admin` on every name).
        OpRequest::Reconfig(_) => (Admin, "/"),
        OpRequest::Multi(_)
        | OpRequest::MultiRead(_)
        | OpRequest::SetWatches(_)
        | OpRequest::SetWatches2(_)
        | OpRequest::Ping
        | OpRequest::Auth(_)
        | OpRequest::Sasl(_)
        | OpRequest::WhoAmI
        | OpRequest::CloseSession => return Need::Nothing,
    };
    Need::Grant(permission, path)
}

fn keep_readable(access: &Access, lists: &mut [&mut Vec<String>]) {
    for paths in lists.iter_mut() {
        paths.retain(|p| access.allows(Permission::Read, p));
    }
}

impl Conn {
    /// Answers `request` if this connection may make it: `auth` packets,
    /// NOAUTH answers and watches on unreadable paths are settled here,
    /// the rest goes to [`Conn::handle`].
    pub async fn serve_request(&mut self, auth: &AuthConfig, mut request: Request) -> Step {
        if matches!(self.access, Access::Open) {
            return self.handle(request).await;
        }
        let xid = request.xid;
        match &mut request.op {
            OpRequest::Auth(packet) => return self.authenticate(auth, packet),
            OpRequest::Multi(multi) | OpRequest::MultiRead(multi) => {
                let refused = multi.ops.iter().position(|op| {
                    let (permission, path) = write_or_read(op);
                    !self.access.allows(permission, path)
                });
                if let Some(index) = refused {
                    let body = failed_multi(multi.ops.len(), index, ErrorCode::NoAuth);
                    let revision = self.cursor;
                    self.reply(xid, revision, body).await;
                    return Step::Continue;
                }
            }
            // Re-armed watches on paths this connection may not read
            // would leak changes: they are dropped, the rest re-armed.
            OpRequest::SetWatches(w) => keep_readable(
                &self.access,
                &mut [
                    &mut w.data_watches,
                    &mut w.exist_watches,
                    &mut w.child_watches,
                ],
            ),
            OpRequest::SetWatches2(w) => keep_readable(
                &self.access,
                &mut [
                    &mut w.data_watches,
                    &mut w.exist_watches,
                    &mut w.child_watches,
                    &mut w.persistent_watches,
                    &mut w.persistent_recursive_watches,
                ],
            ),
            op => {
                let refused = match needs(op) {
                    Need::Nothing => None,
                    Need::Token => {
                        matches!(self.access, Access::Anonymous).then_some(("", "a token"))
                    }
                    Need::Grant(permission, path) => (!self.access.allows(permission, path))
                        .then_some((path, permission.as_str())),
                };
                if let Some((path, needed)) = refused {
                    tracing::debug!(session = %self.session, principal = ?self.access.principal(),
                        path, needed, "zookeeper door: NOAUTH");
                    self.fail(xid, ErrorCode::NoAuth);
                    return Step::Continue;
                }
            }
        }
        self.handle(request).await
    }

    /// `addauth`: a `digest` of `<principal>:<token>` naming a configured
    /// token and its own principal. Anything else ends the connection.
    fn authenticate(&mut self, auth: &AuthConfig, packet: &AuthPacket) -> Step {
        let found = (packet.scheme == DIGEST)
            .then(|| std::str::from_utf8(&packet.auth).ok())
            .flatten()
            .and_then(|text| text.split_once(':'))
            .and_then(|(principal, token)| {
                auth.find(token).filter(|found| found.name == principal)
            });
        match found {
            Some(token) => {
                tracing::info!(session = %self.session, principal = %token.name,
                    "zookeeper door: authenticated");
                self.access = Access::Token(Box::new(token.clone()));
                self.remember_digest(&packet.auth);
                self.push_ok(xid::AUTH);
                Step::Continue
            }
            None => {
                tracing::info!(session = %self.session, scheme = %packet.scheme,
                    "zookeeper door: authentication failed, closing the connection");
                self.fail(xid::AUTH, ErrorCode::AuthFailed);
                Step::Close("authentication failed".into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftlock_api::auth::Grant;

    fn token() -> Token {
        Token {
            name: "billing".into(),
            sha256: raftlock_api::hash_token("t"),
            grants: vec![
                Grant {
                    prefix: "billing/".into(),
                    allow: vec![Permission::Read, Permission::Write],
                },
                Grant {
                    prefix: "shared/".into(),
                    allow: vec![Permission::Read],
                },
            ],
        }
    }

    #[test]
    fn grants_cover_znode_names_by_prefix() {
        let access = Access::Token(Box::new(token()));
        assert!(access.allows(Permission::Write, "/billing/lock-0000000001"));
        assert!(access.allows(Permission::Read, "/shared/x"));
        assert!(!access.allows(Permission::Write, "/shared/x"));
        assert!(!access.allows(Permission::Read, "/other"));
        assert!(!access.allows(Permission::Read, "/"));
        assert!(access.allows(Permission::Read, "/zookeeper/config"));
        assert!(!access.allows(Permission::Write, "/zookeeper/config"));
        assert!(!Access::Anonymous.allows(Permission::Read, "/zookeeper/config"));
        assert!(Access::Open.allows(Permission::Admin, "/"));
    }
}
