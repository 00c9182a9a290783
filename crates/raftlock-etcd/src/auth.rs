//! Who may do what through the door, when the cluster has bearer tokens
//! (`[[auth.tokens]]`, docs/security.md, ADR 0029): the same tokens and
//! grants as the HTTP API and the ZooKeeper door.
//!
//! etcd's `Authenticate(name, password)` takes a token's principal as
//! the name and the token itself as the password, and answers with the
//! token as etcd's auth token: the client sends it as the `token` gRPC
//! metadata on every later call, to any member (no member keeps a table
//! of issued tokens; removing a token from the config revokes it). Every
//! call then needs the grants for what it names: `read` for the keys a
//! range, a watch or a compare reads, `write` for the keys a put or a
//! delete writes, `lock` for the Lock and Election services' names (and,
//! on some prefix, to grant a lease: a lease is a session), `read` for an
//! election's leader. A lease belongs to the principal that granted it:
//! another principal cannot revoke, renew, inspect, list or attach keys
//! to it, unless it is a cluster admin (`admin` on the empty prefix), who
//! also alone may `Compact`. Without tokens every call is allowed and any
//! `token` metadata is ignored.
//!
//! Errors are etcd's: no token `etcdserver: user name is empty`, an
//! unknown one `etcdserver: invalid auth token` (clientv3 then
//! authenticates again by itself), a call outside the grants
//! `etcdserver: permission denied`, a wrong name or password
//! `etcdserver: authentication failed, invalid user ID or password`.

use std::sync::Arc;

use raftlock_api::auth::{AuthConfig, Permission, Token};
use raftlock_core::kv::{KvRequest, TxnRequest};
use raftlock_core::SessionId;
use raftlock_node::Consistency;
use tonic::{Request, Response, Status};

use crate::errors;
use crate::pb::etcdserverpb as pb;
use crate::Etcd;

/// The gRPC metadata etcd's clients carry their auth token in.
const TOKEN_METADATA: &str = "token";

/// The token table, shared by every call of the door.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens {
    config: Arc<AuthConfig>,
    /// The same tokens, handed to callers without a copy.
    shared: Arc<[Arc<Token>]>,
}

impl Tokens {
    pub fn new(config: &AuthConfig) -> Tokens {
        Tokens {
            shared: config.tokens.iter().cloned().map(Arc::new).collect(),
            config: Arc::new(config.clone()),
        }
    }

    fn enabled(&self) -> bool {
        self.config.enabled()
    }

    fn find(&self, presented: &str) -> Option<Arc<Token>> {
        self.config
            .position(presented)
            .and_then(|i| self.shared.get(i).cloned())
    }
}

/// Who is calling.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// The cluster has no tokens: everything is allowed.
    Open,
    /// A call that carried this token.
    Token(Arc<Token>),
}

/// etcd's `ErrGRPCPermissionDenied`.
pub fn permission_denied() -> Status {
    Status::permission_denied("etcdserver: permission denied")
}

/// etcd's `ErrGRPCUserEmpty`: a call without a token.
fn user_empty() -> Status {
    Status::invalid_argument("etcdserver: user name is empty")
}

/// etcd's `ErrGRPCInvalidAuthToken`.
fn invalid_token() -> Status {
    Status::unauthenticated("etcdserver: invalid auth token")
}

/// etcd's `ErrGRPCAuthFailed`.
fn auth_failed() -> Status {
    Status::invalid_argument("etcdserver: authentication failed, invalid user ID or password")
}

/// etcd's `ErrGRPCAuthNotEnabled`.
fn auth_not_enabled() -> Status {
    Status::failed_precondition("etcdserver: authentication is not enabled")
}

/// What the Auth service's management methods answer: users, roles and
/// enabling are the cluster file's.
fn managed_by_config() -> Status {
    Status::failed_precondition(
        "etcdserver: users, roles and permissions are raftlock's bearer tokens, set in the cluster file's [[auth.tokens]] (docs/etcd.md); log in with the token's name as the user and the token as the password",
    )
}

/// `[key, range_end)` in etcd's conventions as the grants check it:
/// an empty end is the key alone, `"\0"` every key from `key` on.
fn end_of(range_end: &[u8]) -> Option<Option<&[u8]>> {
    match range_end {
        [] => None,
        [0] => Some(None),
        end => Some(Some(end)),
    }
}

impl Caller {
    /// The principal, when tokens are on.
    pub fn principal(&self) -> Option<&str> {
        match self {
            Caller::Open => None,
            Caller::Token(token) => Some(&token.name),
        }
    }

    fn refuse(&self, what: &str, key: &[u8], needed: Permission) -> Status {
        tracing::debug!(principal = ?self.principal(), what, key = %String::from_utf8_lossy(key),
            needed = needed.as_str(), "etcd door: permission denied");
        permission_denied()
    }

    /// `permission` on the key, or on `[key, range_end)` (etcd's range).
    pub fn check_range(
        &self,
        permission: Permission,
        key: &[u8],
        range_end: &[u8],
    ) -> Result<(), Status> {
        let Caller::Token(token) = self else {
            return Ok(());
        };
        let allowed = match end_of(range_end) {
            None => token.allows_key(permission, key),
            Some(end) => token.allows_key_range(permission, key, end),
        };
        if allowed {
            Ok(())
        } else {
            Err(self.refuse("range", key, permission))
        }
    }

    /// `permission` on the key alone.
    pub fn check_key(&self, permission: Permission, key: &[u8]) -> Result<(), Status> {
        self.check_range(permission, key, &[])
    }

    /// `permission` on some prefix (granting a lease, which names no key).
    pub fn check_somewhere(&self, permission: Permission) -> Result<(), Status> {
        match self {
            Caller::Token(token) if !token.allows_somewhere(permission) => {
                Err(self.refuse("anywhere", b"", permission))
            }
            _ => Ok(()),
        }
    }

    /// `admin` on the empty prefix.
    pub fn check_cluster_admin(&self) -> Result<(), Status> {
        match self {
            Caller::Token(token) if !token.is_cluster_admin() => {
                Err(self.refuse("cluster", b"", Permission::Admin))
            }
            _ => Ok(()),
        }
    }

    fn is_cluster_admin(&self) -> bool {
        match self {
            Caller::Open => true,
            Caller::Token(token) => token.is_cluster_admin(),
        }
    }

    /// A transaction's compares need `read`, its requests (both
    /// branches, nested ones too) `read` or `write` on what they name,
    /// as etcd checks them. Returns the leases its puts attach.
    pub fn check_txn(&self, txn: &TxnRequest) -> Result<Vec<SessionId>, Status> {
        let mut leases = Vec::new();
        self.check_txn_into(txn, &mut leases)?;
        Ok(leases)
    }

    fn check_txn_into(&self, txn: &TxnRequest, leases: &mut Vec<SessionId>) -> Result<(), Status> {
        for compare in &txn.compare {
            self.check_range(Permission::Read, &compare.key, &compare.range_end)?;
        }
        for request in txn.success.iter().chain(&txn.failure) {
            match request {
                KvRequest::Range(r) => self.check_range(Permission::Read, &r.key, &r.range_end)?,
                KvRequest::Put(p) => {
                    self.check_key(Permission::Write, &p.key)?;
                    leases.extend(p.lease);
                }
                KvRequest::DeleteRange(d) => {
                    self.check_range(Permission::Write, &d.key, &d.range_end)?
                }
                KvRequest::Txn(t) => self.check_txn_into(t, leases)?,
            }
        }
        Ok(())
    }
}

impl Etcd {
    /// Who makes `request`: refused with etcd's errors when tokens are on
    /// and it carries none, or one that is not configured.
    pub(crate) fn caller<T>(&self, request: &Request<T>) -> Result<Caller, Status> {
        if !self.tokens.enabled() {
            return Ok(Caller::Open);
        }
        let value = request
            .metadata()
            .get(TOKEN_METADATA)
            .ok_or_else(user_empty)?;
        let presented = value.to_str().map_err(|_| invalid_token())?;
        self.tokens
            .find(presented)
            .map(Caller::Token)
            .ok_or_else(invalid_token)
    }

    /// May `caller` use lease `id`? Its own leases, or any as a cluster
    /// admin. A lease that does not exist passes: the operation then
    /// answers etcd's `requested lease not found`. A lease granted
    /// without tokens (no principal) is a cluster admin's alone.
    pub(crate) async fn check_lease(&self, caller: &Caller, id: SessionId) -> Result<(), Status> {
        let Some(principal) = caller.principal() else {
            return Ok(());
        };
        if caller.is_cluster_admin() {
            return Ok(());
        }
        let owner = self
            .node
            .session_principal(id, Consistency::Stale)
            .await
            .map_err(errors::status)?;
        let owner = match owner {
            Some(Some(p)) if p == principal => return Ok(()),
            // This member may lag behind the grant: ask the leader's
            // view before refusing.
            _ => self
                .node
                .session_principal(id, Consistency::Linearizable)
                .await
                .map_err(errors::status)?,
        };
        match owner {
            None => Ok(()),
            Some(Some(p)) if p == principal => Ok(()),
            Some(_) => {
                tracing::debug!(
                    principal,
                    lease = id.0,
                    "etcd door: another principal's lease"
                );
                Err(permission_denied())
            }
        }
    }

    /// Whether `caller` may see lease `principal` owns in a listing.
    pub(crate) fn sees_lease(caller: &Caller, owner: Option<&str>) -> bool {
        caller.is_cluster_admin() || (owner.is_some() && owner == caller.principal())
    }

    /// The Authenticate call: `name` a token's principal, `password` the
    /// token. The answer's token is the same token (ADR 0029).
    async fn login(
        &self,
        request: pb::AuthenticateRequest,
    ) -> Result<Response<pb::AuthenticateResponse>, Status> {
        if !self.tokens.enabled() {
            return Err(auth_not_enabled());
        }
        let found = self
            .tokens
            .find(&request.password)
            .filter(|token| token.name == request.name);
        let Some(token) = found else {
            tracing::info!(name = %request.name, "etcd door: authentication failed");
            return Err(auth_failed());
        };
        tracing::debug!(principal = %token.name, "etcd door: authenticated");
        let revision = self.revision().await;
        Ok(Response::new(pb::AuthenticateResponse {
            header: Some(self.header(revision)),
            token: request.password,
        }))
    }
}

/// The Auth service: `Authenticate`, and every management method
/// answered `FAILED_PRECONDITION` naming the cluster file's tokens.
macro_rules! auth_service {
    ($($method:ident($request:ident) -> $response:ident;)*) => {
        #[tonic::async_trait]
        impl pb::auth_server::Auth for Etcd {
            async fn authenticate(
                &self,
                request: Request<pb::AuthenticateRequest>,
            ) -> Result<Response<pb::AuthenticateResponse>, Status> {
                self.login(request.into_inner()).await
            }
            $(
                async fn $method(
                    &self,
                    _request: Request<pb::$request>,
                ) -> Result<Response<pb::$response>, Status> {
                    Err(managed_by_config())
                }
            )*
        }
    };
}

auth_service! {
    auth_enable(AuthEnableRequest) -> AuthEnableResponse;
    auth_disable(AuthDisableRequest) -> AuthDisableResponse;
    user_add(AuthUserAddRequest) -> AuthUserAddResponse;
    user_get(AuthUserGetRequest) -> AuthUserGetResponse;
    user_list(AuthUserListRequest) -> AuthUserListResponse;
    user_delete(AuthUserDeleteRequest) -> AuthUserDeleteResponse;
    user_change_password(AuthUserChangePasswordRequest) -> AuthUserChangePasswordResponse;
    user_grant_role(AuthUserGrantRoleRequest) -> AuthUserGrantRoleResponse;
    user_revoke_role(AuthUserRevokeRoleRequest) -> AuthUserRevokeRoleResponse;
    role_add(AuthRoleAddRequest) -> AuthRoleAddResponse;
    role_get(AuthRoleGetRequest) -> AuthRoleGetResponse;
    role_list(AuthRoleListRequest) -> AuthRoleListResponse;
    role_delete(AuthRoleDeleteRequest) -> AuthRoleDeleteResponse;
    role_grant_permission(AuthRoleGrantPermissionRequest) -> AuthRoleGrantPermissionResponse;
    role_revoke_permission(AuthRoleRevokePermissionRequest) -> AuthRoleRevokePermissionResponse;
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftlock_api::auth::Grant;
    use raftlock_core::kv::{DeleteRangeRequest, KvCompare, KvCompareResult, KvCompareTarget};
    use raftlock_core::kv::{PutRequest, RangeRequest};

    fn caller() -> Caller {
        Caller::Token(Arc::new(Token {
            name: "app".into(),
            sha256: raftlock_api::hash_token("t"),
            grants: vec![
                Grant {
                    prefix: "app/".into(),
                    allow: vec![Permission::Read, Permission::Write],
                },
                Grant {
                    prefix: "shared/".into(),
                    allow: vec![Permission::Read],
                },
            ],
        }))
    }

    #[test]
    fn ranges_follow_etcds_conventions() {
        let c = caller();
        assert!(c.check_key(Permission::Write, b"app/x").is_ok());
        assert!(c.check_range(Permission::Read, b"app/", b"app0").is_ok());
        // "\0" as the end: every key from `key` on.
        assert!(c.check_range(Permission::Read, b"app/", b"\0").is_err());
        assert!(c.check_range(Permission::Read, b"\0", b"\0").is_err());
        let denied = c
            .check_key(Permission::Write, b"shared/x")
            .expect_err("read-only");
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert_eq!(denied.message(), "etcdserver: permission denied");
        assert!(Caller::Open
            .check_range(Permission::Write, b"\0", b"\0")
            .is_ok());
        assert!(Caller::Open.check_cluster_admin().is_ok());
        assert!(c.check_cluster_admin().is_err());
        assert!(c.check_somewhere(Permission::Lock).is_err());
    }

    #[test]
    fn a_transaction_is_checked_on_compares_and_both_branches() {
        let c = caller();
        let put = |key: &[u8], lease: Option<u128>| {
            KvRequest::Put(PutRequest {
                key: key.to_vec(),
                lease: lease.map(SessionId),
                ..PutRequest::default()
            })
        };
        let compare = |key: &[u8]| KvCompare {
            result: KvCompareResult::Equal,
            target: KvCompareTarget::Version(1),
            key: key.to_vec(),
            range_end: Vec::new(),
        };
        let ok = TxnRequest {
            compare: vec![compare(b"shared/flag")],
            success: vec![put(b"app/a", Some(7))],
            failure: vec![KvRequest::Txn(TxnRequest {
                compare: Vec::new(),
                success: vec![KvRequest::Range(RangeRequest {
                    key: b"shared/".to_vec(),
                    range_end: b"shared0".to_vec(),
                    ..RangeRequest::default()
                })],
                failure: vec![put(b"app/b", Some(9))],
            })],
        };
        assert_eq!(
            c.check_txn(&ok).expect("within the grants"),
            vec![SessionId(7), SessionId(9)]
        );
        let compare_outside = TxnRequest {
            compare: vec![compare(b"other/x")],
            ..ok.clone()
        };
        assert!(c.check_txn(&compare_outside).is_err());
        let nested_write = TxnRequest {
            failure: vec![KvRequest::Txn(TxnRequest {
                failure: vec![KvRequest::DeleteRange(DeleteRangeRequest {
                    key: b"shared/".to_vec(),
                    range_end: b"shared0".to_vec(),
                    ..DeleteRangeRequest::default()
                })],
                ..TxnRequest::default()
            })],
            ..ok
        };
        assert!(c.check_txn(&nested_write).is_err());
    }
}
