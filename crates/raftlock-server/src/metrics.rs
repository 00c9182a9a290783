//! `GET /metrics`: Prometheus text format from a small hand-rolled
//! registry. It was kept hand-written for compile time; measured on this
//! project's machine, `prometheus-client` 0.24.1 with its new dependencies
//! builds in 1.4 s, so that reason does not hold, and moving these series
//! to it (OpenMetrics output, collectors for the scrape-time gauges) is
//! left to do (docs/notes.md). Process metrics are in `process.rs`.
//!
//! Gauges are read at scrape time from the node (Raft status, state
//! counts, waiter counters). What the node does not know is recorded
//! here: acquire wait times and failures (in the acquire path), and lock
//! hold times (from the effects every replica applies, so a lock released
//! through another node, by session close or by expiry is counted too).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use raftlock_core::{path::LOCKS_PREFIX, Effects, QueueKind, StateMachine};
use raftlock_node::Consistency;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::state::AppState;

/// Bucket upper bounds in seconds: from a fast uncontended grant to the
/// longest allowed wait (5 min).
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 300.0,
];

/// A cumulative-on-render histogram of durations.
struct Histogram {
    /// Observations per bucket (not cumulative); the last slot is +Inf.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_micros: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let slot = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        self.render_series(out, name, "");
    }

    /// The series without the header; `labels` is `a="x",b="y"` or empty.
    fn render_series(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            match BUCKETS.get(i) {
                Some(le) => {
                    let _ = writeln!(
                        out,
                        "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {cumulative}"
                    );
                }
            }
        }
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let count = self.count.load(Ordering::Relaxed);
        if labels.is_empty() {
            let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
        } else {
            let _ = writeln!(
                out,
                "{name}_sum{{{labels}}} {sum}\n{name}_count{{{labels}}} {count}"
            );
        }
    }
}

/// What the API records itself. One per router.
pub(crate) struct Metrics {
    acquire_wait: Histogram,
    hold: Histogram,
    /// Granted acquires and campaigns served by this node.
    grants: AtomicU64,
    /// Failed acquires and campaigns by error code.
    failures: Mutex<BTreeMap<&'static str, u64>>,
    /// When this replica applied the grant of each held lock node.
    held: Mutex<Held>,
    /// Request latency by method and route template (the router's
    /// matched path, so the label set is bounded by the routes).
    requests: Mutex<BTreeMap<(String, String), Histogram>>,
    /// Keys `Held::since` by node path: fixed random keys, so clients
    /// cannot choose lock names that collide.
    path_hasher: RandomState,
}

/// The lock nodes this replica saw granted and not yet deleted.
#[derive(Default)]
struct Held {
    /// Hash of the lock node's path → when its grant was applied. A hash,
    /// not the path: 24 bytes an entry instead of ~100 with the `String`,
    /// one entry per held lock. Two held nodes with one 64-bit hash (about
    /// one chance in 10^9 with 100,000 held locks) would mistime one hold,
    /// nothing else.
    since: HashMap<u64, Instant>,
    /// The node's snapshot-install count when `since` was last checked
    /// against the state: an install replaces the whole state without
    /// effects, so held nodes may have vanished unseen.
    installs_seen: u64,
}

impl Held {
    /// Gives the table's memory back when released locks left it mostly
    /// empty (a `HashMap` keeps its capacity through removals); only below
    /// a quarter, so it stays amortized O(1) per release.
    fn shrink_if_sparse(&mut self) {
        let since = &mut self.since;
        if since.capacity() > 64 && since.len() < since.capacity() / 4 {
            since.shrink_to(since.len() * 2);
        }
    }
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        Arc::new(Metrics {
            acquire_wait: Histogram::new(),
            hold: Histogram::new(),
            grants: AtomicU64::new(0),
            failures: Mutex::new(BTreeMap::new()),
            held: Mutex::default(),
            requests: Mutex::default(),
            path_hasher: RandomState::new(),
        })
    }

    fn failures(&self) -> MutexGuard<'_, BTreeMap<&'static str, u64>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn key(&self, path: &str) -> u64 {
        self.path_hasher.hash_one(path)
    }

    /// After a snapshot install (`installs` moved since the last call),
    /// forgets held nodes that no longer hold in `state`: they vanished
    /// without an effect. Costs nothing otherwise.
    fn prune_after_install(&self, installs: u64, state: &StateMachine) {
        let mut held = self.held();
        if held.installs_seen == installs {
            return;
        }
        held.installs_seen = installs;
        if held.since.is_empty() {
            return;
        }
        let holders: HashSet<u64> = state
            .queues(QueueKind::Lock, "")
            .iter()
            .filter_map(|q| q.holder.as_ref())
            .map(|h| self.key(&h.node))
            .collect();
        held.since.retain(|key, _| holders.contains(key));
        held.shrink_if_sparse();
    }

    /// A granted acquire that waited `waited`.
    pub fn granted(&self, waited: Duration) {
        self.grants.fetch_add(1, Ordering::Relaxed);
        self.acquire_wait.observe(waited);
    }

    /// A request to `route` (the route template) answered in `took`.
    /// Long-polls count their wait; event streams until their headers.
    pub fn request(&self, method: &str, route: &str, took: Duration) {
        let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        requests
            .entry((method.to_string(), route.to_string()))
            .or_insert_with(Histogram::new)
            .observe(took);
    }

    /// A failed acquire, by error code.
    pub fn failed(&self, code: &'static str) {
        *self.failures().entry(code).or_default() += 1;
    }

    fn on_effects(&self, effects: &Effects) {
        let is_lock = |p: &str| {
            p.strip_prefix(LOCKS_PREFIX)
                .is_some_and(|r| r.starts_with('/'))
        };
        let now = Instant::now();
        let mut held = self.held();
        for deleted in effects.deleted.iter().filter(|d| is_lock(&d.path)) {
            if let Some(since) = held.since.remove(&self.key(&deleted.path)) {
                self.hold.observe(now.saturating_duration_since(since));
            }
        }
        for granted in effects.granted.iter().filter(|p| is_lock(p)) {
            held.since.insert(self.key(granted), now);
        }
        held.shrink_if_sparse();
    }

    /// Follows the replica's applied effects to time lock holds. Ends when
    /// the router (the last strong reference) or the node goes away.
    pub fn track_holds(self: &Arc<Self>, mut changes: broadcast::Receiver<Arc<Effects>>) {
        let weak: Weak<Self> = Arc::downgrade(self);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no tokio runtime: lock hold times will not be recorded");
            return;
        };
        runtime.spawn(async move {
            loop {
                let received = changes.recv().await;
                let Some(metrics) = weak.upgrade() else {
                    return;
                };
                match received {
                    Ok(effects) => metrics.on_effects(&effects),
                    // Missed grants or deletes: those holds cannot be timed.
                    Err(RecvError::Lagged(_)) => metrics.held().since.clear(),
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }
}

/// Middleware: times each routed request for
/// `raftlock_http_request_duration_seconds`.
pub(crate) async fn time_request(
    State(metrics): State<Arc<Metrics>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let method = request.method().clone();
    let start = Instant::now();
    let response = next.run(request).await;
    metrics.request(method.as_str(), &route, start.elapsed());
    response
}

/// A summary without quantiles: the node keeps a count and a sum only,
/// enough for a mean over time (`rate(x_sum) / rate(x_count)`).
fn summary(out: &mut String, name: &str, help: &str, count: u64, sum_micros: u64) {
    let sum = sum_micros as f64 / 1e6;
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} summary\n{name}_sum {sum}\n{name}_count {count}"
    );
}

fn gauge(out: &mut String, name: &str, help: &str, kind: &str, value: impl std::fmt::Display) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

/// The metrics route in the OpenAPI document (`openapi.rs`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(scrape))]
pub(crate) struct Api;

/// `GET /metrics`.
#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String)))]
pub(crate) async fn scrape(State(app): State<AppState>) -> impl IntoResponse {
    let status = app.node.status();
    let counters = app.node.counters();
    let metrics = &app.metrics;
    // A local read: metrics must answer even without a leader.
    let (counts, revision) = app
        .node
        .read(Consistency::Stale, |s| {
            metrics.prune_after_install(counters.snapshots_installed, s);
            (s.counts(), s.revision())
        })
        .await
        .unwrap_or_default();

    let mut out = String::with_capacity(4096);
    let is_leader = u8::from(status.leader_id == Some(status.id));
    gauge(
        &mut out,
        "raftlock_node_id",
        "This node's id.",
        "gauge",
        status.id,
    );
    gauge(
        &mut out,
        "raftlock_is_leader",
        "Whether this node is the Raft leader (1) or not (0).",
        "gauge",
        is_leader,
    );
    gauge(
        &mut out,
        "raftlock_has_leader",
        "Whether this node knows a leader (1) or not (0).",
        "gauge",
        u8::from(status.leader_id.is_some()),
    );
    if let Some(leader) = status.leader_id {
        gauge(
            &mut out,
            "raftlock_leader_id",
            "The leader this node knows.",
            "gauge",
            leader,
        );
    }
    gauge(
        &mut out,
        "raftlock_term",
        "Current Raft term.",
        "gauge",
        status.term,
    );
    gauge(
        &mut out,
        "raftlock_last_log_index",
        "Last log index on this node.",
        "gauge",
        status.last_log_index.unwrap_or(0),
    );
    gauge(
        &mut out,
        "raftlock_applied_index",
        "Last log index applied to this node's state machine.",
        "gauge",
        status.applied_index,
    );
    gauge(
        &mut out,
        "raftlock_revision",
        "Global revision of this replica's state.",
        "gauge",
        revision,
    );
    gauge(
        &mut out,
        "raftlock_sessions",
        "Open sessions.",
        "gauge",
        counts.sessions,
    );
    gauge(
        &mut out,
        "raftlock_nodes",
        "Nodes in the tree (root excluded).",
        "gauge",
        counts.nodes,
    );
    gauge(
        &mut out,
        "raftlock_locks_held",
        "Queues with a holder (locks and elections).",
        "gauge",
        counts.held,
    );
    gauge(
        &mut out,
        "raftlock_lock_waiters",
        "Queued nodes that do not hold (locks and elections).",
        "gauge",
        counts.waiters,
    );
    gauge(
        &mut out,
        "raftlock_waiter_registrations",
        "Waiting acquires registered on this node (one per watched path).",
        "gauge",
        counters.waiter_registrations,
    );
    gauge(
        &mut out,
        "raftlock_wakeups_total",
        "Waiter wake-ups delivered by this node.",
        "counter",
        counters.wakeups,
    );
    gauge(
        &mut out,
        "raftlock_tracked_sessions",
        "Session deadlines tracked (non-zero on the leader only).",
        "gauge",
        counters.tracked_sessions,
    );
    gauge(
        &mut out,
        "raftlock_session_expiries_total",
        "Sessions this node expired as leader (no keepalive within the TTL).",
        "counter",
        counters.sessions_expired,
    );
    gauge(
        &mut out,
        "raftlock_leader_changes_total",
        "Times this node saw a new Raft leader (the first one included).",
        "counter",
        counters.leader_changes,
    );
    summary(
        &mut out,
        "raftlock_commit_seconds",
        "Time from proposing a batch as leader to its commit and apply (append, quorum replication with fsyncs, apply).",
        counters.commits,
        counters.commit_micros,
    );
    summary(
        &mut out,
        "raftlock_fsync_seconds",
        "Time of each log durability barrier (sled flush, then fdatasync).",
        counters.fsyncs,
        counters.fsync_micros,
    );
    gauge(
        &mut out,
        "raftlock_acquire_grants_total",
        "Acquires and campaigns granted through this node's API.",
        "counter",
        metrics.grants.load(Ordering::Relaxed),
    );
    metrics.acquire_wait.render(
        &mut out,
        "raftlock_acquire_wait_seconds",
        "Time from an acquire or campaign request to its grant.",
    );
    metrics.hold.render(
        &mut out,
        "raftlock_lock_hold_seconds",
        "Time from a lock grant to its release, as applied on this replica.",
    );
    let name = "raftlock_acquire_failures_total";
    let _ = writeln!(
        out,
        "# HELP {name} Failed acquires and campaigns by error code.\n# TYPE {name} counter"
    );
    for (reason, count) in metrics.failures().iter() {
        let _ = writeln!(out, "{name}{{reason=\"{reason}\"}} {count}");
    }
    let name = "raftlock_http_request_duration_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Time from a request's routing to its response headers, by method and route.\n# TYPE {name} histogram"
    );
    for ((method, route), histogram) in metrics
        .requests
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        // Route templates hold no `"` or `\\`: nothing to escape.
        let labels = format!("method=\"{method}\",route=\"{route}\"");
        histogram.render_series(&mut out, name, &labels);
    }
    crate::process::render(&mut out);
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        out,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftlock_core::DeletedNode;

    #[test]
    fn histogram_renders_cumulative_buckets() {
        let h = Histogram::new();
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(1000));
        let mut out = String::new();
        h.render(&mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"0.005\"} 1"), "{out}");
        assert!(out.contains("x_bucket{le=\"300\"} 1"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 2"), "{out}");
        assert!(out.contains("x_count 2"), "{out}");
    }

    #[test]
    fn holds_are_timed_from_grant_to_delete_for_locks_only() {
        let m = Metrics::new();
        m.on_effects(&Effects {
            granted: vec![
                "/locks/a/lock-0000000001".into(),
                "/elections/e/lock-0000000002".into(),
            ],
            ..Effects::default()
        });
        assert_eq!(m.held().since.len(), 1);
        m.on_effects(&Effects {
            deleted: vec![DeletedNode {
                path: "/locks/a/lock-0000000001".into(),
                owner: None,
            }],
            ..Effects::default()
        });
        assert_eq!(m.hold.count.load(Ordering::Relaxed), 1);
        assert!(m.held().since.is_empty());
    }

    #[test]
    fn holds_that_vanished_in_a_snapshot_install_are_forgotten() {
        use raftlock_core::{Command, SessionId};
        let mut state = StateMachine::new();
        let session = SessionId(7);
        state.apply(&Command::OpenSession {
            id: session,
            owner: "test".into(),
            ttl_ms: 5_000,
        });
        let granted = state
            .apply(&Command::Acquire {
                kind: QueueKind::Lock,
                name: "kept".into(),
                session,
                data: vec![],
                wait: true,
            })
            .effects
            .granted;
        let m = Metrics::new();
        m.on_effects(&Effects {
            granted: granted
                .into_iter()
                .chain(["/locks/gone/lock-0000000001".to_string()])
                .collect(),
            ..Effects::default()
        });
        m.prune_after_install(0, &state);
        assert_eq!(m.held().since.len(), 2, "no install, nothing checked");
        m.prune_after_install(1, &state);
        assert_eq!(m.held().since.len(), 1, "only the node still holding");
    }
}
