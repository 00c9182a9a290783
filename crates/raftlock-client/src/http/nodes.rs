//! Node writes over HTTP: `PUT /v1/nodes/{path}` (optionally guarded by a
//! lock holder's fencing token) and `POST /v1/txn`, as docs/api.md spells
//! their bodies.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use raftlock_core::{Compare, HolderGuard, TxnOp};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::wire::parse;
use super::{Call, HttpClient};
use crate::error::{ClientError, Result};
use crate::types::{NodeWritten, Txn, TxnOpResult, TxnOutcome};

/// A tree path, checked before it goes into a URL (as lock names are).
pub(crate) fn checked_path(path: &str) -> Result<&str> {
    raftlock_core::path::validate_node_path(path)
        .map(|()| path)
        .map_err(|e| ClientError::BadRequest(e.to_string()))
}

/// The URL path of tree node `path`, checked and percent-encoded:
/// `/a/b` → `/v1/nodes/a/b`, the root → `/v1/nodes`.
pub(crate) fn node_url(path: &str) -> Result<String> {
    Ok(match checked_path(path)? {
        "/" => "/v1/nodes".to_string(),
        path => format!("/v1/nodes{}", super::wire::percent_encode(path)),
    })
}

#[derive(Serialize)]
struct IfHolder<'a> {
    lock: &'a str,
    fencing_token: u64,
}

impl<'a> From<&'a HolderGuard> for IfHolder<'a> {
    fn from(g: &'a HolderGuard) -> Self {
        IfHolder {
            lock: &g.lock,
            fencing_token: g.fencing_token,
        }
    }
}

#[derive(Serialize)]
pub(crate) struct PutBody<'a> {
    data: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    sequential: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_version: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    if_holder: Option<IfHolder<'a>>,
}

impl PutBody<'_> {
    /// A plain write of `data` (no session, no holder guard).
    pub(crate) fn new(
        data: &[u8],
        sequential: bool,
        expected_version: Option<u64>,
    ) -> PutBody<'static> {
        PutBody {
            data: BASE64.encode(data),
            session_id: None,
            sequential,
            expected_version,
            if_holder: None,
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum CompareBody<'a> {
    Version { path: &'a str, version: u64 },
    Value { path: &'a str, value: String },
    Holder(IfHolder<'a>),
}

#[derive(Serialize)]
struct DeleteBody<'a> {
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_version: Option<u64>,
}

#[derive(Serialize)]
struct TxnBody<'a> {
    compare: Vec<CompareBody<'a>>,
    success: Vec<OpBody<'a>>,
    failure: Vec<OpBody<'a>>,
}

/// A written node as the API answers it (extra fields tolerated).
#[derive(Deserialize)]
struct Written {
    path: String,
    version: u64,
    create_revision: u64,
    mod_revision: u64,
    #[serde(default)]
    created: bool,
}

impl From<Written> for NodeWritten {
    fn from(w: Written) -> Self {
        NodeWritten {
            path: w.path,
            created: w.created,
            version: w.version,
            create_revision: w.create_revision,
            mod_revision: w.mod_revision,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum OpAnswer {
    Put(Written),
    Delete { path: String },
}

#[derive(Deserialize)]
struct TxnAnswer {
    succeeded: bool,
    responses: Vec<OpAnswer>,
}

fn compare_body(c: &Compare) -> Result<CompareBody<'_>> {
    Ok(match c {
        Compare::Version { path, version } => CompareBody::Version {
            path: checked_path(path)?,
            version: *version,
        },
        Compare::Value { path, value } => CompareBody::Value {
            path: checked_path(path)?,
            value: BASE64.encode(value),
        },
        Compare::Holder(guard) => CompareBody::Holder(guard.into()),
    })
}

fn op_body(op: &TxnOp) -> Result<OpBody<'_>> {
    Ok(match op {
        TxnOp::Put {
            path,
            data,
            session,
            sequential,
            expected_version,
        } => OpBody::Put(PathedPut {
            path: checked_path(path)?,
            body: PutBody {
                data: BASE64.encode(data),
                session_id: session.map(|s| s.to_string()),
                sequential: *sequential,
                expected_version: *expected_version,
                if_holder: None,
            },
        }),
        TxnOp::Delete {
            path,
            expected_version,
        } => OpBody::Delete(DeleteBody {
            path: checked_path(path)?,
            expected_version: *expected_version,
        }),
    })
}

/// A put operation: its path next to the node body's fields.
#[derive(Serialize)]
struct PathedPut<'a> {
    path: &'a str,
    #[serde(flatten)]
    body: PutBody<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum OpBody<'a> {
    Put(PathedPut<'a>),
    Delete(DeleteBody<'a>),
}

impl HttpClient {
    pub(crate) async fn put_node_http(
        &self,
        path: &str,
        data: &[u8],
        guard: Option<&HolderGuard>,
    ) -> Result<NodeWritten> {
        let url = node_url(path)?;
        let body = PutBody {
            data: BASE64.encode(data),
            session_id: None,
            sequential: false,
            expected_version: None,
            if_holder: guard.map(IfHolder::from),
        };
        let call = Call::new(Method::PUT, url).json(&body).once();
        let mut written: Written = parse(&self.call(call).await?)?;
        // `PUT` answers 201 for a create; the body has no `created` field.
        written.created = written.version == 1;
        Ok(written.into())
    }

    pub(crate) async fn txn_http(&self, txn: &Txn) -> Result<TxnOutcome> {
        let body = TxnBody {
            compare: txn
                .compare
                .iter()
                .map(compare_body)
                .collect::<Result<_>>()?,
            success: txn.success.iter().map(op_body).collect::<Result<_>>()?,
            failure: txn.failure.iter().map(op_body).collect::<Result<_>>()?,
        };
        let call = Call::new(Method::POST, "/v1/txn".into()).json(&body).once();
        let answer: TxnAnswer = parse(&self.call(call).await?)?;
        Ok(TxnOutcome {
            succeeded: answer.succeeded,
            responses: answer
                .responses
                .into_iter()
                .map(|r| match r {
                    OpAnswer::Put(w) => TxnOpResult::Put(w.into()),
                    OpAnswer::Delete { path } => TxnOpResult::Delete(path),
                })
                .collect(),
        })
    }
}
