//! The Watch service: one bidirectional stream carries many watches.
//! Each watch replays this member's kept key-space history from its
//! start revision and then follows every applied entry (subscribe, then
//! read: nothing is missed), so a client connected to any member sees
//! every change in revision order, as etcd promises. A start below the
//! compaction floor is answered as etcd does: canceled, with the compact
//! revision.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use raftlock_api::auth::Permission;
use raftlock_node::Consistency;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::convert;
use crate::pb::etcdserverpb as pb;
use crate::pb::etcdserverpb::watch_create_request::FilterType;
use crate::pb::etcdserverpb::watch_request::RequestUnion;
use crate::Etcd;

/// How often an idle watch with `progress_notify` is told the revision
/// (etcd's default progress interval).
const PROGRESS_INTERVAL: Duration = Duration::from_secs(600);

type Out = mpsc::Sender<Result<pb::WatchResponse, Status>>;

#[tonic::async_trait]
impl pb::watch_server::Watch for Etcd {
    async fn watch(
        &self,
        request: Request<Streaming<pb::WatchRequest>>,
    ) -> Result<Response<tonic::codegen::BoxStream<pb::WatchResponse>>, Status> {
        // etcd checks each watch it creates: one without a valid token,
        // or outside the token's `read` grants, is canceled with
        // `permission denied` (the stream stays).
        let caller = self.caller(&request);
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let this = self.clone();
        tokio::spawn(async move {
            let mut watches: HashMap<i64, JoinHandle<()>> = HashMap::new();
            let mut next_id = 0i64;
            while let Some(Ok(req)) = incoming.next().await {
                match req.request_union {
                    Some(RequestUnion::CreateRequest(create)) => {
                        watches.retain(|_, w| !w.is_finished());
                        let id = if create.watch_id != 0 {
                            create.watch_id
                        } else {
                            while watches.contains_key(&next_id) {
                                next_id += 1;
                            }
                            next_id
                        };
                        // A watch from now starts after every change
                        // acknowledged before it was asked for, so this
                        // member's revision is read linearizably: a
                        // follower may not have applied the client's last
                        // write yet (etcd's member has, as it answered).
                        let now = if create.start_revision > 0 {
                            Ok(this.revision().await)
                        } else {
                            this.node
                                .revision(Consistency::Linearizable)
                                .await
                                .map_err(|e| crate::errors::status(e).message().to_string())
                        };
                        let (revision, unavailable) = match now {
                            Ok(revision) => (revision, None),
                            Err(reason) => (this.revision().await, Some(reason)),
                        };
                        let permitted = caller.as_ref().is_ok_and(|c| {
                            c.check_range(Permission::Read, &create.key, &create.range_end)
                                .is_ok()
                        });
                        let refused = if !permitted {
                            Some(crate::auth::permission_denied().message().to_string())
                        } else if watches.contains_key(&id) {
                            Some("etcdserver: duplicate watch ID".to_string())
                        } else {
                            unavailable
                        };
                        if let Some(reason) = refused {
                            let refused = pb::WatchResponse {
                                header: Some(this.header(revision)),
                                watch_id: id,
                                created: true,
                                canceled: true,
                                cancel_reason: reason,
                                ..Default::default()
                            };
                            if tx.send(Ok(refused)).await.is_err() {
                                break;
                            }
                            continue;
                        }
                        let created = pb::WatchResponse {
                            header: Some(this.header(revision)),
                            watch_id: id,
                            created: true,
                            ..Default::default()
                        };
                        if tx.send(Ok(created)).await.is_err() {
                            break;
                        }
                        let start = u64::try_from(create.start_revision)
                            .ok()
                            .filter(|s| *s > 0)
                            .unwrap_or(revision + 1);
                        let task =
                            tokio::spawn(follow(this.clone(), id, create, start, tx.clone()));
                        watches.insert(id, task);
                    }
                    Some(RequestUnion::CancelRequest(cancel)) => {
                        if let Some(task) = watches.remove(&cancel.watch_id) {
                            task.abort();
                            let revision = this.revision().await;
                            let canceled = pb::WatchResponse {
                                header: Some(this.header(revision)),
                                watch_id: cancel.watch_id,
                                canceled: true,
                                ..Default::default()
                            };
                            if tx.send(Ok(canceled)).await.is_err() {
                                break;
                            }
                        }
                    }
                    Some(RequestUnion::ProgressRequest(_)) => {
                        // Not tied to a watch (etcd's watch id -1): every
                        // event after this revision is still to come.
                        let revision = this.revision().await;
                        let progress = pb::WatchResponse {
                            header: Some(this.header(revision)),
                            watch_id: -1,
                            ..Default::default()
                        };
                        if tx.send(Ok(progress)).await.is_err() {
                            break;
                        }
                    }
                    None => {}
                }
            }
            for (_, task) in watches {
                task.abort();
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// Sends watch `id`'s events from revision `next` on, until the stream
/// closes or the watch is canceled (the task is aborted).
async fn follow(this: Etcd, id: i64, create: pb::WatchCreateRequest, mut next: u64, tx: Out) {
    let no_put = create.filters.contains(&(FilterType::Noput as i32));
    let no_delete = create.filters.contains(&(FilterType::Nodelete as i32));
    let mut applied = this.node.subscribe_kv();
    loop {
        applied.borrow_and_update();
        let read = match this
            .node
            .kv_events_since(next, &create.key, &create.range_end)
            .await
        {
            Ok(read) => read,
            Err(e) => {
                let _ = tx.send(Err(crate::errors::status(e))).await;
                return;
            }
        };
        match read.events {
            Err(compact_revision) => {
                // No cancel reason, as etcd sends none: clientv3 reads
                // `compact_revision` as its ErrCompacted.
                let compacted = pb::WatchResponse {
                    header: Some(this.header(read.revision)),
                    watch_id: id,
                    canceled: true,
                    compact_revision: i64::try_from(compact_revision).unwrap_or(i64::MAX),
                    ..Default::default()
                };
                let _ = tx.send(Ok(compacted)).await;
                return;
            }
            Ok(events) => {
                let events: Vec<_> = events
                    .into_iter()
                    .filter(|e| match e.kind {
                        raftlock_core::kv::KvEventKind::Put => !no_put,
                        raftlock_core::kv::KvEventKind::Delete => !no_delete,
                    })
                    .map(|e| convert::event(e, create.prev_kv))
                    .collect();
                next = next.max(read.revision + 1);
                if !events.is_empty() {
                    let response = pb::WatchResponse {
                        header: Some(this.header(read.revision)),
                        watch_id: id,
                        events,
                        ..Default::default()
                    };
                    if tx.send(Ok(response)).await.is_err() {
                        return;
                    }
                }
            }
        }
        let changed = applied.changed();
        if create.progress_notify {
            match tokio::time::timeout(PROGRESS_INTERVAL, changed).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    let revision = this
                        .node
                        .revision(Consistency::Stale)
                        .await
                        .unwrap_or(next.saturating_sub(1));
                    let progress = pb::WatchResponse {
                        header: Some(this.header(revision)),
                        watch_id: id,
                        ..Default::default()
                    };
                    if tx.send(Ok(progress)).await.is_err() {
                        return;
                    }
                }
            }
        } else if changed.await.is_err() {
            return;
        }
    }
}
