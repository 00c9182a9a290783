//! The Grafana dashboard (`docs/grafana-dashboard.json`) queries only
//! metrics a member exports: every `raftlock_*` name in its queries must be
//! a sample in a live `/metrics` scrape of a real `raftlock serve`
//! process (docs/grafana.md).

mod support;

use std::collections::BTreeSet;

use serde_json::{json, Value};
use support::ProcessCluster;

fn dashboard() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana-dashboard.json"
    );
    let text = std::fs::read_to_string(path).expect("docs/grafana-dashboard.json");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every PromQL text of the dashboard: panel targets (rows' nested panels
/// included) and template variable queries.
fn queries(dashboard: &Value) -> Vec<String> {
    fn walk(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map {
                    match (key.as_str(), inner) {
                        ("expr" | "definition", Value::String(text)) => out.push(text.clone()),
                        ("query", Value::String(text)) => out.push(text.clone()),
                        _ => walk(inner, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(dashboard, &mut out);
    out
}

/// The `raftlock_*` and `process_*` metric names a query mentions.
fn metric_names(query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = query;
    let next = |text: &str| {
        ["raftlock_", "process_"]
            .iter()
            .filter_map(|prefix| text.find(prefix))
            .min()
    };
    while let Some(start) = next(rest) {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// Sample names of a Prometheus text scrape (`name{labels} value`).
fn sample_names(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

#[test]
fn finds_metric_names_in_queries() {
    let query =
        "histogram_quantile(0.99, sum by (le) (rate(raftlock_a_bucket{x=\"1\"}[5m]))) / raftlock_b / process_open_fds";
    assert_eq!(
        metric_names(query),
        ["raftlock_a_bucket", "raftlock_b", "process_open_fds"]
    );
    let scrape = "# HELP raftlock_c c\nraftlock_c 1\nraftlock_d_total{reason=\"x\"} 2\n";
    let names: Vec<String> = sample_names(scrape).into_iter().collect();
    assert_eq!(names, ["raftlock_c", "raftlock_d_total"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_queries_is_exported() {
    let dashboard = dashboard();
    let queried: BTreeSet<String> = queries(&dashboard)
        .iter()
        .flat_map(|q| metric_names(q))
        .collect();
    assert!(queried.len() >= 10, "too few metrics found: {queried:?}");

    let cluster = ProcessCluster::start(1);
    cluster.leader(&[1]).await;
    // A grant, a failed try-lock and a release, so every family has samples
    // (failures are labelled by reason and absent until one happens).
    let holder = cluster.open_session(1, "holder", 60_000).await;
    let other = cluster.open_session(1, "other", 60_000).await;
    let acquire = |session: &str| json!({"session_id": session, "wait_ms": 0});
    let (status, body) = cluster
        .post(1, "/v1/locks/m/acquire", acquire(&holder))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = cluster
        .post(1, "/v1/locks/m/acquire", acquire(&other))
        .await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = cluster
        .post(1, "/v1/locks/m/release", json!({"session_id": holder}))
        .await;
    assert_eq!(status, 204, "{body}");

    // Per-route latency is recorded after each response: the releases
    // above are in this scrape.
    let scrape = cluster
        .http
        .get(cluster.url(1, "/metrics"))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("scrape text");
    let exported = sample_names(&scrape);
    let missing: Vec<&String> = queried.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "docs/grafana-dashboard.json queries metrics /metrics does not export: {missing:?}\n{scrape}"
    );
}
