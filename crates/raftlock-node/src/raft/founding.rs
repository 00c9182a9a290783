//! First start of a fresh cluster. The lowest-id member of the config
//! file (the founder) draws the cluster id and initializes the membership,
//! naming each seed's incarnation, which it asks of the seed itself: so it
//! waits until every seed answers. It founds nothing if any seed already
//! belongs to a cluster (a wiped founder rejoins instead of founding a
//! second cluster). The other members never initialize.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::disk::identity::hex;
use crate::replica::{PeerIdentity, Replica};
use crate::transport::network::route;

/// Pause between rounds while some seed does not answer yet.
const RETRY: Duration = Duration::from_millis(200);
/// Longest one seed's answer may take.
const ASK_WAIT: Duration = Duration::from_millis(500);

/// Founds the cluster if this member is the founder and nobody has yet.
pub(crate) async fn found_cluster(replica: Arc<Replica>) {
    let founder = replica.config.members.keys().next() == Some(&replica.id);
    if !founder {
        return;
    }
    let mut waiting_logged = false;
    loop {
        if replica.is_initialized_now() || replica.shutdown.is_stopping() {
            return;
        }
        match ask_seeds(&replica).await {
            Round::Joined(peer) => {
                tracing::info!(peer, "a seed already belongs to a cluster; joining it");
                return;
            }
            Round::Missing(peer) => {
                if !waiting_logged {
                    tracing::info!(peer, "founding: waiting for every seed to answer");
                    waiting_logged = true;
                }
            }
            Round::Ready(incarnations) => {
                found(&replica, incarnations).await;
                return;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY) => {}
            _ = replica.shutdown.stopped() => return,
        }
    }
}

/// What one round of asking every seed found.
enum Round {
    /// This seed belongs to a cluster already.
    Joined(u64),
    /// This seed did not answer.
    Missing(u64),
    /// Every seed answered, none belongs to a cluster: their incarnations.
    Ready(BTreeMap<u64, u64>),
}

async fn ask_seeds(replica: &Replica) -> Round {
    let mut incarnations = BTreeMap::new();
    for peer in replica.config.members.keys() {
        let answer: PeerIdentity = if *peer == replica.id {
            replica.peer_identity()
        } else {
            match replica
                .peers
                .call(*peer, route::IDENTITY, &(), ASK_WAIT)
                .await
            {
                Ok(answer) => answer,
                Err(_) => return Round::Missing(*peer),
            }
        };
        let joined =
            answer.initialized || (*peer != replica.id && answer.identity.cluster_id.is_some());
        if joined {
            return Round::Joined(*peer);
        }
        incarnations.insert(*peer, answer.identity.incarnation);
    }
    Round::Ready(incarnations)
}

async fn found(replica: &Replica, incarnations: BTreeMap<u64, u64>) {
    // A founder that crashed after drawing the id keeps it.
    let cluster_id = replica
        .guard
        .identity
        .get()
        .cluster_id
        .unwrap_or_else(|| rand::random::<u64>().max(1));
    if let Err(e) = replica.guard.found(cluster_id) {
        tracing::error!("cannot record the cluster id: {e}");
        return;
    }
    let mut members = replica.config.members.clone();
    for (id, member) in members.iter_mut() {
        member.incarnation = incarnations.get(id).copied().unwrap_or(0);
    }
    match replica.raft.current().initialize(members).await {
        Ok(()) => tracing::info!(cluster = %hex(cluster_id), "founded a new cluster"),
        Err(e) => tracing::info!("cluster already initialized: {e}"),
    }
}
