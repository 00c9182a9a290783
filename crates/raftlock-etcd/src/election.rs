//! The Election service (etcd's v3election), as etcd's server runs it:
//! clientv3's election recipe over the key space. A campaigner queues
//! `name/<lease hex>` with its value and lease and becomes leader when
//! its key is the oldest under `name/` (`turn`, shared with the Lock
//! service: lease 0 and an expired lease refused, never orphaned);
//! Proclaim puts a new value while the key is still the leader's (it
//! exists with the leader's revision and none under the name is older),
//! Resign deletes it, Leader reads the oldest key, Observe streams each
//! leader and each of its values in revision order.
//!
//! With tokens, Campaign, Proclaim and Resign need `lock` on the name
//! (and on the leader key they name) with the caller's own lease, as
//! `/v1/elections` does; Leader and Observe need `read` on the name.
//! Errors are the recipe's, which etcd sends with code `UNKNOWN`:
//! `election: not leader`, `election: no leader`.

use raftlock_api::auth::Permission;
use raftlock_core::kv::{prefix_end, KeyValue, RangeRequest, SortOrder, SortTarget};
use raftlock_node::Consistency;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::auth::Caller;
use crate::convert::{self, lease};
use crate::errors;
use crate::pb::v3electionpb as pb;
use crate::turn::Existing;
use crate::Etcd;

/// The recipe's `ErrElectionNotLeader`.
fn not_leader() -> Status {
    Status::unknown("election: not leader")
}

/// The recipe's `ErrElectionNoLeader`.
fn no_leader() -> Status {
    Status::unknown("election: no leader")
}

/// etcd's `ErrMissingLeaderKey`.
fn missing_leader() -> Status {
    Status::unknown("\"leader\" field must be provided")
}

fn prefix_of(name: &[u8]) -> Vec<u8> {
    let mut prefix = name.to_vec();
    prefix.push(b'/');
    prefix
}

fn wire(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

type ObserveStream = tonic::codegen::BoxStream<pb::LeaderResponse>;

impl Etcd {
    /// The oldest key under `prefix` at `revision` (0: the newest), and
    /// the revision read.
    async fn leader_at(
        &self,
        prefix: &[u8],
        revision: u64,
        consistency: Consistency,
    ) -> Result<(Option<KeyValue>, u64), Status> {
        let found = self
            .node
            .kv_range(
                RangeRequest {
                    key: prefix.to_vec(),
                    range_end: prefix_end(prefix),
                    limit: 1,
                    revision,
                    sort_order: SortOrder::Ascend,
                    sort_target: SortTarget::Create,
                    ..RangeRequest::default()
                },
                consistency,
            )
            .await
            .map_err(errors::status)?;
        Ok((found.kvs.into_iter().next(), found.revision))
    }

    /// A leader key's name and key need `lock`, its lease must be the
    /// caller's.
    async fn check_leader(&self, caller: &Caller, leader: &pb::LeaderKey) -> Result<(), Status> {
        caller.check_key(Permission::Lock, &leader.name)?;
        caller.check_key(Permission::Lock, &leader.key)?;
        if let Some(session) = lease(leader.lease) {
            self.check_lease(caller, session).await?;
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl pb::election_server::Election for Etcd {
    async fn campaign(
        &self,
        request: Request<pb::CampaignRequest>,
    ) -> Result<Response<pb::CampaignResponse>, Status> {
        let caller = self.caller(&request)?;
        let r = request.into_inner();
        caller.check_key(Permission::Lock, &r.name)?;
        if let Some(session) = lease(r.lease) {
            self.check_lease(&caller, session).await?;
        }
        let turn = self
            .wait_turn(&prefix_of(&r.name), r.lease, r.value, Existing::Update)
            .await?;
        Ok(Response::new(pb::CampaignResponse {
            header: Some(self.header(turn.revision)),
            leader: Some(pb::LeaderKey {
                name: r.name,
                key: turn.key,
                rev: wire(turn.create_revision),
                lease: r.lease,
            }),
        }))
    }

    async fn proclaim(
        &self,
        request: Request<pb::ProclaimRequest>,
    ) -> Result<Response<pb::ProclaimResponse>, Status> {
        let caller = self.caller(&request)?;
        let r = request.into_inner();
        let leader = r.leader.ok_or_else(missing_leader)?;
        self.check_leader(&caller, &leader).await?;
        let session = lease(leader.lease).ok_or_else(errors::lease_not_found)?;
        // Revision 0 would match a missing key: never a leader's.
        let revision = u64::try_from(leader.rev)
            .ok()
            .filter(|r| *r > 0)
            .ok_or_else(not_leader)?;
        // Only the leader proclaims: the key must be the oldest under the
        // name (etcd's recipe checks only that the key still exists; a
        // LeaderKey is only handed out to the leader, so no client of the
        // recipe sees a difference).
        let prefix = prefix_of(&leader.name);
        if !leader.key.starts_with(&prefix) {
            return Err(not_leader());
        }
        let (proclaimed, at) = self
            .put_if_still(&leader.key, revision, r.value, session, Some(&prefix))
            .await?;
        if !proclaimed {
            return Err(not_leader());
        }
        Ok(Response::new(pb::ProclaimResponse {
            header: Some(self.header(at)),
        }))
    }

    async fn leader(
        &self,
        request: Request<pb::LeaderRequest>,
    ) -> Result<Response<pb::LeaderResponse>, Status> {
        let caller = self.caller(&request)?;
        let name = request.into_inner().name;
        caller.check_key(Permission::Read, &name)?;
        let (found, revision) = self
            .leader_at(&prefix_of(&name), 0, Consistency::Linearizable)
            .await?;
        let kv = found.ok_or_else(no_leader)?;
        Ok(Response::new(pb::LeaderResponse {
            header: Some(self.header(revision)),
            kv: Some(convert::kv(kv)),
        }))
    }

    async fn observe(
        &self,
        request: Request<pb::LeaderRequest>,
    ) -> Result<Response<ObserveStream>, Status> {
        let caller = self.caller(&request)?;
        let name = request.into_inner().name;
        caller.check_key(Permission::Read, &name)?;
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(observe(self.clone(), prefix_of(&name), tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn resign(
        &self,
        request: Request<pb::ResignRequest>,
    ) -> Result<Response<pb::ResignResponse>, Status> {
        let caller = self.caller(&request)?;
        let leader = request.into_inner().leader.ok_or_else(missing_leader)?;
        self.check_leader(&caller, &leader).await?;
        // As the recipe: delete the key if it is still the one elected
        // (and this lease's); otherwise there is nothing to resign.
        let at = match u64::try_from(leader.rev).ok().filter(|r| *r > 0) {
            Some(revision) => {
                self.delete_if_still(&leader.key, revision, Some(lease(leader.lease)))
                    .await?
            }
            None => self.revision().await,
        };
        Ok(Response::new(pb::ResignResponse {
            header: Some(self.header(at)),
        }))
    }
}

type Out = mpsc::Sender<Result<pb::LeaderResponse, Status>>;

/// Sends the leader under `prefix` now and after every revision that
/// changes it (a new leader, or the leader's new value), replaying the
/// kept history so no leader is skipped, until the stream closes.
async fn observe(this: Etcd, prefix: Vec<u8>, tx: Out) {
    let end = prefix_end(&prefix);
    let mut applied = this.node.subscribe_kv();
    applied.borrow_and_update();
    let mut last: Option<(Vec<u8>, u64)> = None;
    let send = |kv: Option<KeyValue>, revision: u64, last: &mut Option<(Vec<u8>, u64)>| {
        let now = kv.as_ref().map(|kv| (kv.key.clone(), kv.mod_revision));
        let changed = now.is_some() && now != *last;
        *last = now;
        changed.then(|| pb::LeaderResponse {
            header: Some(this.header(revision)),
            kv: kv.map(convert::kv),
        })
    };
    let mut next = match this.leader_at(&prefix, 0, Consistency::Linearizable).await {
        Ok((kv, revision)) => {
            if let Some(first) = send(kv, revision, &mut last) {
                if tx.send(Ok(first)).await.is_err() {
                    return;
                }
            }
            revision + 1
        }
        Err(e) => {
            let _ = tx.send(Err(e)).await;
            return;
        }
    };
    loop {
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            () = tx.closed() => return,
        }
        let read = match this.node.kv_events_since(next, &prefix, &end).await {
            Ok(read) => read,
            Err(e) => {
                let _ = tx.send(Err(errors::status(e))).await;
                return;
            }
        };
        let mut revisions: Vec<u64> = match &read.events {
            Ok(events) => events.iter().map(|e| e.revision()).collect(),
            // The history was cut below `next`: the newest state is all
            // there is to show.
            Err(_) => vec![0],
        };
        revisions.dedup();
        for revision in revisions {
            let (kv, at) = match this.leader_at(&prefix, revision, Consistency::Stale).await {
                Ok(found) => found,
                // Compacted meanwhile: the newest state instead.
                Err(_) => match this.leader_at(&prefix, 0, Consistency::Stale).await {
                    Ok(found) => found,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                },
            };
            let header_revision = if revision == 0 { at } else { revision };
            if let Some(response) = send(kv, header_revision, &mut last) {
                if tx.send(Ok(response)).await.is_err() {
                    return;
                }
            }
        }
        next = next.max(read.revision + 1);
    }
}
