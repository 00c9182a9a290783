//! The door with bearer tokens (`[[auth.tokens]]`), over a three-member
//! in-process cluster with the codec as the client: nothing but session
//! upkeep before `addauth digest`, NOAUTH outside the token's grants (also
//! inside a multi, per operation), AUTHFAILED and a closed connection for
//! a wrong token or scheme; without tokens credentials change nothing.

mod common;

use common::*;
use raftlock_api::auth::{hash_token, AuthConfig, Grant, Permission, Token};
use raftlock_zookeeper::door::DoorConfig;
use raftlock_zookeeper::wire::*;

const JOBS_TOKEN: &str = "jobs-secret";

/// `jobs` may write under `/jobs/` and read under `/shared/`.
fn tokens() -> AuthConfig {
    AuthConfig {
        tokens: vec![Token {
            name: "jobs".into(),
            sha256: hash_token(JOBS_TOKEN),
            grants: vec![
                Grant {
                    prefix: "jobs/".into(),
                    allow: vec![Permission::Read, Permission::Write],
                },
                Grant {
                    prefix: "shared/".into(),
                    allow: vec![Permission::Read],
                },
            ],
        }],
    }
}

fn with_tokens() -> DoorConfig {
    DoorConfig {
        auth: tokens(),
        ..door_config()
    }
}

fn auth(scheme: &str, credentials: &str) -> OpRequest {
    OpRequest::Auth(AuthPacket {
        auth_type: 0,
        scheme: scheme.into(),
        auth: credentials.as_bytes().to_vec(),
    })
}

fn multi(ops: Vec<MultiOp>) -> OpRequest {
    OpRequest::Multi(MultiRequest { ops })
}

fn multi_errors(body: ReplyBody) -> Vec<ErrorCode> {
    let ReplyBody::Multi(m) = body else {
        panic!("expected a multi answer, got {body:?}");
    };
    m.results
        .into_iter()
        .map(|r| match r {
            OpResult::Error { err } => err,
            other => panic!("expected per-operation errors, got {other:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_addauth_only_session_upkeep_is_served() {
    let cluster = Cluster::start(with_tokens()).await;
    let addr = cluster.addr(1);
    client(move || {
        let mut c = Conn::connect(addr, 10_000);
        c.ping();
        c.fails(OpRequest::GetData(pw("/jobs/x", false)), ErrorCode::NoAuth);
        c.fails(OpRequest::Exists(pw("/", false)), ErrorCode::NoAuth);
        c.fails(
            OpRequest::GetData(pw("/zookeeper/config", false)),
            ErrorCode::NoAuth,
        );
        c.fails(
            OpRequest::Create(create("/jobs", b"", CreateMode::Persistent)),
            ErrorCode::NoAuth,
        );
        // After authenticating the same connection is served.
        let r = c.call_xid(xid::AUTH, auth("digest", &format!("jobs:{JOBS_TOKEN}")));
        assert_eq!(r.header.err, ErrorCode::Ok);
        c.fails(OpRequest::GetData(pw("/jobs/x", false)), ErrorCode::NoNode);
        c.ok(OpRequest::GetData(pw("/zookeeper/config", false)));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_reaches_only_its_grants() {
    let cluster = Cluster::start(with_tokens()).await;
    let (one, two) = (cluster.addr(1), cluster.addr(2));
    client(move || {
        let mut c = Conn::connect(one, 10_000);
        let r = c.call_xid(xid::AUTH, auth("digest", &format!("jobs:{JOBS_TOKEN}")));
        assert_eq!(r.header.err, ErrorCode::Ok);
        // The tree's root is nobody's but an admin's: `/jobs/` is not
        // `/jobs`, as for HTTP grants (`jobs/` covers `jobs/x` only).
        c.fails(
            OpRequest::Create(create("/jobs", b"", CreateMode::Persistent)),
            ErrorCode::NoAuth,
        );
        c.fails(
            OpRequest::Create(create("/shared", b"", CreateMode::Persistent)),
            ErrorCode::NoAuth,
        );
        // Readable but not writable: `/shared/` (its node does not exist,
        // so a read answers NONODE, not NOAUTH).
        c.fails(OpRequest::GetData(pw("/shared/x", true)), ErrorCode::NoNode);
        c.fails(
            OpRequest::SetData(SetDataRequest {
                path: "/shared/x".into(),
                data: Some(b"v".to_vec()),
                version: -1,
            }),
            ErrorCode::NoAuth,
        );
        c.fails(
            OpRequest::Delete(DeleteRequest {
                path: "/other".into(),
                version: -1,
            }),
            ErrorCode::NoAuth,
        );
        c.fails(OpRequest::GetChildren(pw("/", false)), ErrorCode::NoAuth);
        // `exists` needs only a token, as ZooKeeper never checks its ACL.
        c.ok(OpRequest::Exists(pw("/", false)));
        // A multi with one operation outside the grants runs none of them,
        // and says which one was refused.
        let errors = multi_errors(c.ok(multi(vec![
            MultiOp::Create(create("/jobs/a", b"", CreateMode::Persistent)),
            MultiOp::Create(create("/other/b", b"", CreateMode::Persistent)),
            MultiOp::Check(CheckVersionRequest {
                path: "/jobs/a".into(),
                version: -1,
            }),
        ])));
        assert_eq!(
            errors,
            [
                ErrorCode::Ok,
                ErrorCode::NoAuth,
                ErrorCode::RuntimeInconsistency
            ]
        );
        // Nothing of it was applied, seen from another member too.
        let mut other = Conn::connect(two, 10_000);
        let r = other.call_xid(xid::AUTH, auth("digest", &format!("jobs:{JOBS_TOKEN}")));
        assert_eq!(r.header.err, ErrorCode::Ok);
        other.fails(OpRequest::Exists(pw("/jobs/a", false)), ErrorCode::NoNode);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_or_scheme_fails_and_closes() {
    let cluster = Cluster::start(with_tokens()).await;
    let addr = cluster.addr(1);
    client(move || {
        for (scheme, credentials) in [
            ("digest", "jobs:not-the-token".to_string()),
            // The right token under another principal's name.
            ("digest", format!("ops:{JOBS_TOKEN}")),
            ("digest", JOBS_TOKEN.to_string()),
            ("ip", "127.0.0.1".to_string()),
        ] {
            let mut c = Conn::connect(addr, 10_000);
            let r = c.call_xid(xid::AUTH, auth(scheme, &credentials));
            assert_eq!(
                r.header.err,
                ErrorCode::AuthFailed,
                "{scheme} {credentials}"
            );
            assert!(c.is_closed(), "{scheme} {credentials}: the connection ends");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_credentials_are_accepted_and_unused() {
    let cluster = Cluster::start(door_config()).await;
    let addr = cluster.addr(1);
    client(move || {
        let mut c = Conn::connect(addr, 10_000);
        let r = c.call_xid(xid::AUTH, auth("digest", "anyone:anything"));
        assert_eq!(r.header.err, ErrorCode::Ok);
        created(c.ok(OpRequest::Create(create(
            "/open",
            b"",
            CreateMode::Persistent,
        ))));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acls_auth_entry_is_the_tokens_digest_id() {
    let cluster = Cluster::start(with_tokens()).await;
    // `/jobs` itself is outside the grants: made through the node.
    let node = cluster.inner.running().next().expect("a member").clone();
    let parent = raftlock_core::TreeOp::Create {
        path: "/jobs".into(),
        data: vec![],
        session: None,
        sequential: false,
    };
    node.tree_ops(vec![parent]).await.expect("parent");
    let one = cluster.addr(1);
    client(move || {
        let mut c = Conn::connect(one, 10_000);
        let r = c.call_xid(xid::AUTH, auth("digest", &format!("jobs:{JOBS_TOKEN}")));
        assert_eq!(r.header.err, ErrorCode::Ok);
        let auth_acl = vec![Acl::new(perms::ALL, "auth", "")];
        c.ok(OpRequest::Create(CreateRequest {
            acl: auth_acl,
            ..create("/jobs/a", b"", CreateMode::Persistent)
        }));
        let body = c.ok(OpRequest::GetAcl(PathRequest {
            path: "/jobs/a".into(),
        }));
        // base64(sha1("jobs:jobs-secret")), as ZooKeeper's digest
        // provider would have it for the same `addauth`.
        let expected = Acl::new(perms::ALL, "digest", "jobs:KwPb2OMKJ9zu0bLK1h8Ab31IK4M=");
        assert!(
            matches!(&body, ReplyBody::GetAcl { acl, .. } if acl == &[expected]),
            "{body:?}"
        );
    })
    .await;
}
