//! [`LockClient`] over HTTP: one API route per operation.

use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::Method;

use super::wire::{self, parse};
use super::{Call, HttpClient};
use crate::client::{LeaderStream, LockClient};
use crate::error::Result;
use crate::types::{
    checked, FencingCheck, Grant, Leader, Lease, LockState, NodeWritten, Poll, SessionId, Txn,
    TxnOutcome,
};
use crate::watch::{NodeData, NodeWatch};
use raftlock_api::{Mode, QueueKind};
use raftlock_core::HolderGuard;

impl LockClient for HttpClient {
    fn open_session<'a>(&'a self, owner: &'a str, ttl: Duration) -> BoxFuture<'a, Result<Lease>> {
        Box::pin(async move {
            let call = Call::new(Method::POST, "/v1/sessions".into())
                .json(&wire::OpenSession::new(owner, ttl));
            let opened: wire::SessionOpened = parse(&self.call(call).await?)?;
            Ok(Lease {
                id: wire::session_id(&opened.session_id)?,
                ttl: Duration::from_millis(opened.ttl_ms),
            })
        })
    }

    fn keepalive(&self, session: SessionId) -> BoxFuture<'_, Result<Duration>> {
        Box::pin(async move {
            let call = Call::new(Method::POST, format!("/v1/sessions/{session}/keepalive"));
            let ttl: wire::Ttl = parse(&self.call(call).await?)?;
            Ok(Duration::from_millis(ttl.ttl_ms))
        })
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let call = Call::new(Method::DELETE, format!("/v1/sessions/{session}")).gone_is_done();
            self.call(call).await.map(drop)
        })
    }

    fn acquire<'a>(
        &'a self,
        name: &'a str,
        session: SessionId,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Grant>> {
        Box::pin(async move {
            let call = Call::new(
                Method::POST,
                format!("/v1/locks/{}/acquire", checked(name)?),
            )
            .json(&wire::Acquire::new(session, poll))
            .wait(poll.wait);
            let acquired: wire::Acquired = parse(&self.call(call).await?)?;
            Ok(Grant {
                name: acquired.lock,
                node: acquired.node,
                fencing_token: acquired.fencing_token,
                session: wire::session_id(&acquired.session_id)?,
            })
        })
    }

    fn release<'a>(&'a self, name: &'a str, session: SessionId) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let call = Call::new(
                Method::POST,
                format!("/v1/locks/{}/release", checked(name)?),
            )
            .json(&wire::SessionOnly {
                session_id: session.to_string(),
            })
            .gone_is_done();
            self.call(call).await.map(drop)
        })
    }

    fn lock_state<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<LockState>> {
        Box::pin(async move {
            let call = Call::new(Method::GET, format!("/v1/locks/{}", checked(name)?));
            wire::lock_state(parse(&self.call(call).await?)?)
        })
    }

    fn fencing_check<'a>(
        &'a self,
        name: &'a str,
        token: u64,
    ) -> BoxFuture<'a, Result<FencingCheck>> {
        Box::pin(async move {
            let call = Call::new(Method::POST, "/v1/fencing/check".into()).json(
                &raftlock_api::lock::FencingBody {
                    lock: checked(name)?.to_string(),
                    fencing_token: token,
                },
            );
            Ok(wire::fencing(parse(&self.call(call).await?)?))
        })
    }

    fn campaign<'a>(
        &'a self,
        name: &'a str,
        session: SessionId,
        value: &'a str,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Grant>> {
        Box::pin(async move {
            let path = format!("/v1/elections/{}/campaign", checked(name)?);
            let call = Call::new(Method::POST, path)
                .json(&wire::Campaign::new(session, value, poll))
                .wait(poll.wait);
            let elected: wire::Elected = parse(&self.call(call).await?)?;
            Ok(Grant {
                name: name.to_string(),
                node: elected.node,
                fencing_token: elected.fencing_token,
                session,
            })
        })
    }

    fn proclaim<'a>(
        &'a self,
        name: &'a str,
        session: SessionId,
        value: &'a str,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let path = format!("/v1/elections/{}/proclaim", checked(name)?);
            let call = Call::new(Method::POST, path).json(&wire::Proclaim {
                session_id: session.to_string(),
                value,
            });
            self.call(call).await.map(drop)
        })
    }

    fn resign<'a>(&'a self, name: &'a str, session: SessionId) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let path = format!("/v1/elections/{}/resign", checked(name)?);
            let call = Call::new(Method::POST, path)
                .json(&wire::SessionOnly {
                    session_id: session.to_string(),
                })
                .gone_is_done();
            self.call(call).await.map(drop)
        })
    }

    fn leader<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Leader>>> {
        Box::pin(async move {
            let call = Call::new(Method::GET, format!("/v1/elections/{}", checked(name)?));
            wire::leader(parse(&self.call(call).await?)?)
        })
    }

    fn acquire_shared<'a>(
        &'a self,
        name: &'a str,
        mode: Mode,
        session: SessionId,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Grant>> {
        Box::pin(super::primitives::acquire_shared(
            self, name, mode, session, poll,
        ))
    }

    fn release_shared<'a>(
        &'a self,
        name: &'a str,
        kind: QueueKind,
        session: SessionId,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(super::primitives::release_shared(self, name, kind, session))
    }

    fn acquire_multi<'a>(
        &'a self,
        locks: &'a [String],
        session: SessionId,
        poll: Poll,
    ) -> BoxFuture<'a, Result<Vec<Grant>>> {
        Box::pin(super::primitives::acquire_multi(self, locks, session, poll))
    }

    fn release_multi<'a>(
        &'a self,
        locks: &'a [String],
        session: SessionId,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(super::primitives::release_multi(self, locks, session))
    }

    fn observe(&self, name: &str) -> LeaderStream {
        super::sse::observe(self.clone(), name.to_string())
    }

    fn put_node<'a>(
        &'a self,
        path: &'a str,
        data: &'a [u8],
        guard: Option<&'a HolderGuard>,
    ) -> BoxFuture<'a, Result<NodeWritten>> {
        Box::pin(self.put_node_http(path, data, guard))
    }

    fn txn<'a>(&'a self, txn: &'a Txn) -> BoxFuture<'a, Result<TxnOutcome>> {
        Box::pin(self.txn_http(txn))
    }

    fn read_node<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<(NodeData, u64)>> {
        Box::pin(HttpClient::read_node(self, path))
    }

    fn watch(&self, path: &str, since_revision: Option<u64>) -> NodeWatch {
        HttpClient::watch(self, path, since_revision)
    }
}
