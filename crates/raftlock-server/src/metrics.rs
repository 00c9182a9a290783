//! `GET /metrics`: OpenMetrics text from a `prometheus-client` registry.
//! It was hand-written for compile time until `prometheus-client` 0.24.1
//! was measured building in 1.4 s on this project's machine
//! (docs/adr/0016-metrics-on-prometheus-client.md); the names, labels and meanings are those
//! docs/api.md lists. Process metrics are in `process.rs`.
//!
//! Two registries are encoded into one scrape: the one in [`Metrics`],
//! holding what the node does not know and is recorded here (acquire wait
//! times and failures in the acquire path, lock hold times from the
//! effects every replica applies, so a lock released through another
//! node, by session close or by expiry is counted too, request latency),
//! and one built per scrape from values read at that moment (Raft status,
//! state counts, the node's counters, `/proc`), as constant gauges and
//! counters: those values live in the node, so copying them into
//! long-lived gauges would only add a second place to keep in step.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Metric, Registry};
use raftlock_core::{path::LOCKS_PREFIX, Effects};
use raftlock_node::{Consistency, Node};
use tokio::sync::broadcast::{self, error::RecvError};

use crate::state::AppState;

/// The OpenMetrics text format `prometheus-client` writes; Prometheus
/// negotiates it and parses it natively.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Bucket upper bounds in seconds: from a fast uncontended grant to the
/// longest allowed wait (5 min). `+Inf` is added by `Histogram::new`.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 300.0,
];

fn duration_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// `raftlock_acquire_failures_total{reason}`: the error code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Failure {
    reason: &'static str,
}

/// `raftlock_http_request_duration_seconds{method, route}`: the route is
/// the router's matched template, so the label set is bounded by the
/// routes.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Request {
    method: String,
    route: String,
}

type Requests = Family<Request, Histogram, fn() -> Histogram>;

/// What the API records itself. One per router.
pub(crate) struct Metrics {
    /// The series below, registered once; encoded at every scrape.
    registry: Registry,
    acquire_wait: Histogram,
    hold: Histogram,
    /// Granted acquires and campaigns served by this node.
    grants: Counter,
    /// Failed acquires and campaigns by error code.
    failures: Family<Failure, Counter>,
    /// When this replica applied the grant of each held lock node.
    held: Mutex<Held>,
    /// Request latency by method and route template.
    requests: Requests,
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
        let acquire_wait = duration_histogram();
        let hold = duration_histogram();
        let grants = Counter::default();
        let failures = Family::<Failure, Counter>::default();
        let requests = Requests::new_with_constructor(duration_histogram);
        // `prometheus-client` appends `_total` to counters and `.` to help.
        let mut registry = Registry::default();
        registry.register(
            "raftlock_acquire_grants",
            "Acquires and campaigns granted through this node's API",
            grants.clone(),
        );
        registry.register(
            "raftlock_acquire_wait_seconds",
            "Time from an acquire or campaign request to its grant",
            acquire_wait.clone(),
        );
        registry.register(
            "raftlock_lock_hold_seconds",
            "Time from a lock grant to its release, as applied on this replica",
            hold.clone(),
        );
        registry.register(
            "raftlock_acquire_failures",
            "Failed acquires and campaigns by error code",
            failures.clone(),
        );
        registry.register(
            "raftlock_http_request_duration_seconds",
            "Time from a request's routing to its response headers, by method and route",
            requests.clone(),
        );
        Arc::new(Metrics {
            registry,
            acquire_wait,
            hold,
            grants,
            failures,
            held: Mutex::default(),
            requests,
            path_hasher: RandomState::new(),
        })
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn key(&self, path: &str) -> u64 {
        self.path_hasher.hash_one(path)
    }

    /// After a snapshot install (`installs` moved since the last call),
    /// forgets held nodes that no longer hold on this replica: they
    /// vanished without an effect. Costs nothing otherwise.
    async fn prune_after_install(&self, installs: u64, node: &Node) {
        if !self.install_seen(installs) {
            return;
        }
        // A local read: metrics must answer even without a leader.
        let Ok(locks) = node.locks("", Consistency::Stale, |_| true).await else {
            return;
        };
        self.keep_holders(
            locks
                .iter()
                .filter_map(|line| line.holder.as_ref())
                .map(|h| h.node.as_str()),
        );
    }

    /// True once per new snapshot install count, when held nodes are
    /// timed (there is something to prune).
    fn install_seen(&self, installs: u64) -> bool {
        let mut held = self.held();
        if held.installs_seen == installs {
            return false;
        }
        held.installs_seen = installs;
        !held.since.is_empty()
    }

    /// Forgets the held nodes that are not among `holders`.
    fn keep_holders<'a>(&self, holders: impl Iterator<Item = &'a str>) {
        let holders: HashSet<u64> = holders.map(|node| self.key(node)).collect();
        let mut held = self.held();
        held.since.retain(|key, _| holders.contains(key));
        held.shrink_if_sparse();
    }

    /// A granted acquire that waited `waited`.
    pub fn granted(&self, waited: Duration) {
        self.grants.inc();
        self.acquire_wait.observe(waited.as_secs_f64());
    }

    /// A request to `route` (the route template) answered in `took`.
    /// Long-polls count their wait; event streams until their headers.
    pub fn request(&self, method: &str, route: &str, took: Duration) {
        let labels = Request {
            method: method.to_string(),
            route: route.to_string(),
        };
        self.requests
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// A failed acquire, by error code.
    pub fn failed(&self, code: &'static str) {
        self.failures.get_or_create(&Failure { reason: code }).inc();
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
                self.hold
                    .observe(now.saturating_duration_since(since).as_secs_f64());
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

/// A count and a sum of durations without buckets, which is what the
/// node keeps for commits and fsyncs: enough for a mean over time
/// (`rate(x_sum) / rate(x_count)`). It was a quantile-less summary;
/// `prometheus-client` has no summary type, so it is a histogram whose
/// only bucket is `+Inf` (the same `_sum` and `_count` series, plus
/// `_bucket{le="+Inf"}` equal to the count).
#[derive(Debug)]
struct CountAndSum {
    count: u64,
    sum_micros: u64,
}

impl EncodeMetric for CountAndSum {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let sum = self.sum_micros as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, self.count, &[(f64::MAX, self.count)], None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Registers a value read at scrape time as a gauge.
fn gauge<N>(registry: &mut Registry, name: &str, help: &str, value: N)
where
    ConstGauge<N>: Metric,
{
    registry.register(name, help, ConstGauge::new(value));
}

/// Registers a count read at scrape time; `name` is without `_total`.
fn counter<N>(registry: &mut Registry, name: &str, help: &str, value: N)
where
    ConstCounter<N>: Metric,
{
    registry.register(name, help, ConstCounter::new(value));
}

/// The metrics route in the OpenAPI document (`openapi.rs`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(scrape))]
pub(crate) struct Api;

/// `GET /metrics`.
#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses((status = 200, description = "OpenMetrics text format", content_type = "application/openmetrics-text", body = String)))]
pub(crate) async fn scrape(State(app): State<AppState>) -> impl IntoResponse {
    let status = app.node.status();
    let counters = app.node.counters();
    let metrics = &app.metrics;
    metrics
        .prune_after_install(counters.snapshots_installed, &app.node)
        .await;
    // A local read: metrics must answer even without a leader.
    let counts = app.node.state_counts().await.unwrap_or_default();
    let revision = counts.revision;

    let mut now = Registry::default();
    let r = &mut now;
    let is_leader = u64::from(status.leader_id == Some(status.id));
    gauge(r, "raftlock_node_id", "This node's id", status.id);
    gauge(
        r,
        "raftlock_is_leader",
        "Whether this node is the Raft leader (1) or not (0)",
        is_leader,
    );
    gauge(
        r,
        "raftlock_has_leader",
        "Whether this node knows a leader (1) or not (0)",
        u64::from(status.leader_id.is_some()),
    );
    if let Some(leader) = status.leader_id {
        gauge(
            r,
            "raftlock_leader_id",
            "The leader this node knows",
            leader,
        );
    }
    gauge(r, "raftlock_term", "Current Raft term", status.term);
    if let Some((open, limit)) = app.shedding.gauges() {
        gauge(
            r,
            "raftlock_api_connections",
            "Client connections open on this member's API",
            open as u64,
        );
        gauge(
            r,
            "raftlock_api_connection_limit",
            "Client connections this member takes now: api.max_connections, fewer while \
             it falls behind its load",
            limit as u64,
        );
    }
    gauge(
        r,
        "raftlock_last_log_index",
        "Last log index on this node",
        status.last_log_index.unwrap_or(0),
    );
    gauge(
        r,
        "raftlock_applied_index",
        "Last log index applied to this node's state machine",
        status.applied_index,
    );
    gauge(
        r,
        "raftlock_revision",
        "Global revision of this replica's state",
        revision,
    );
    gauge(r, "raftlock_sessions", "Open sessions", counts.sessions);
    gauge(
        r,
        "raftlock_nodes",
        "Nodes in the tree (root excluded)",
        counts.nodes,
    );
    gauge(
        r,
        "raftlock_locks_held",
        "Queues with a holder (locks and elections)",
        counts.held,
    );
    gauge(
        r,
        "raftlock_lock_waiters",
        "Queued nodes that do not hold (locks and elections)",
        counts.waiters,
    );
    gauge(
        r,
        "raftlock_waiter_registrations",
        "Waiting acquires registered on this node (one per watched path)",
        counters.waiter_registrations,
    );
    counter(
        r,
        "raftlock_wakeups",
        "Waiter wake-ups delivered by this node",
        counters.wakeups,
    );
    gauge(
        r,
        "raftlock_tracked_sessions",
        "Session deadlines tracked (non-zero on the leader only)",
        counters.tracked_sessions,
    );
    counter(
        r,
        "raftlock_session_expiries",
        "Sessions this node expired as leader (no keepalive within the TTL)",
        counters.sessions_expired,
    );
    counter(
        r,
        "raftlock_leader_changes",
        "Times this node saw a new Raft leader (the first one included)",
        counters.leader_changes,
    );
    r.register(
        "raftlock_commit_seconds",
        "Time from proposing a batch as leader to its commit and apply (append, quorum replication with fsyncs, apply)",
        CountAndSum {
            count: counters.commits,
            sum_micros: counters.commit_micros,
        },
    );
    r.register(
        "raftlock_fsync_seconds",
        "Time of each log durability barrier (sled flush, then fdatasync)",
        CountAndSum {
            count: counters.fsyncs,
            sum_micros: counters.fsync_micros,
        },
    );
    crate::process::register(r);

    let mut out = String::with_capacity(8192);
    let encoded = encode_registry(&mut out, &metrics.registry)
        .and_then(|()| encode_registry(&mut out, &now))
        .and_then(|()| encode_eof(&mut out));
    match encoded {
        Ok(()) => ([(CONTENT_TYPE, OPENMETRICS)], out).into_response(),
        Err(e) => {
            // Writing to a `String` does not fail; an encoder error is a bug.
            tracing::error!("encoding /metrics: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raftlock_core::DeletedNode;

    /// The recorded series as a scrape shows them.
    fn encoded(m: &Metrics) -> String {
        let mut out = String::new();
        encode_registry(&mut out, &m.registry).expect("encode");
        out
    }

    #[test]
    fn recorded_series_keep_their_names_and_buckets() {
        let m = Metrics::new();
        m.granted(Duration::from_millis(3));
        m.granted(Duration::from_secs(1000));
        m.failed("lock_held");
        m.request("GET", "/v1/sessions/{id}", Duration::from_millis(2));
        let out = encoded(&m);
        for line in [
            "# TYPE raftlock_acquire_wait_seconds histogram",
            "raftlock_acquire_wait_seconds_bucket{le=\"0.005\"} 1",
            "raftlock_acquire_wait_seconds_bucket{le=\"300.0\"} 1",
            "raftlock_acquire_wait_seconds_bucket{le=\"+Inf\"} 2",
            "raftlock_acquire_wait_seconds_count 2",
            "raftlock_acquire_grants_total 2",
            "raftlock_acquire_failures_total{reason=\"lock_held\"} 1",
            "raftlock_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/sessions/{id}\"} 1",
            "# TYPE raftlock_lock_hold_seconds histogram",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} missing:\n{out}");
        }
    }

    #[test]
    fn count_and_sum_keeps_the_summary_series_names() {
        let mut r = Registry::default();
        r.register(
            "raftlock_commit_seconds",
            "help",
            CountAndSum {
                count: 3,
                sum_micros: 1_500_000,
            },
        );
        let mut out = String::new();
        encode_registry(&mut out, &r).expect("encode");
        for line in [
            "raftlock_commit_seconds_sum 1.5",
            "raftlock_commit_seconds_count 3",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} missing:\n{out}");
        }
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
        assert!(
            encoded(&m)
                .lines()
                .any(|l| l == "raftlock_lock_hold_seconds_count 1"),
            "one hold timed"
        );
        assert!(m.held().since.is_empty());
    }

    #[test]
    fn holds_that_vanished_in_a_snapshot_install_are_forgotten() {
        let kept = "/locks/kept/lock-0000000001";
        let m = Metrics::new();
        m.on_effects(&Effects {
            granted: vec![kept.to_string(), "/locks/gone/lock-0000000002".to_string()],
            ..Effects::default()
        });
        assert!(!m.install_seen(0), "no install, nothing checked");
        assert_eq!(m.held().since.len(), 2);
        assert!(m.install_seen(1));
        m.keep_holders([kept].into_iter());
        assert_eq!(m.held().since.len(), 1, "only the node still holding");
        assert!(!m.install_seen(1), "each install is checked once");
    }
}
