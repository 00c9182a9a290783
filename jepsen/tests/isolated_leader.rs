//! Regression scenario for the isolated leader, with real processes: a leader cut off
//! from the majority must not keep a client's session alive while the
//! majority expires it and grants its lock to another client.
//!
//! Client C opens a session (TTL 3 s) on the leader L and acquires the
//! lock; its keepalives go to L only (as an embedded application's, or the
//! Rust HTTP client's after a success). Every Raft link of L is cut; L
//! stays reachable to C. Client D, on a follower, waits for the lock. The
//! majority elects a new leader, expires C's session and grants the lock
//! to D. C must have observed the loss (by the client crate's rule: the
//! deadline after its last successful keepalive, or `session_not_found`)
//! before D's grant returned: otherwise two clients held the lock at once.
//! The recorded history is also judged by the mutex checker, which must
//! agree.
//!
//! `#[ignore]`d like `cluster.rs` (it needs `target/debug/raftlock`, or
//! `RAFTLOCK_BIN`); `jepsen/ci.sh` runs it. Against a build without the
//! fix it fails with "two holders".

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use raftlock_jepsen::api::Reply;
use raftlock_jepsen::checker::linear::LinearConfig;
use raftlock_jepsen::control::net::grouped;
use raftlock_jepsen::control::{default_raftlock_bin, Cluster, ClusterOptions, ClusterTiming};
use raftlock_jepsen::proxy::LinkState;
use raftlock_jepsen::runlog::{Call, RunLog};
use raftlock_jepsen::workload::route::Routing;
use raftlock_jepsen::workload::session::{End, Session};
use raftlock_jepsen::workload::{Ctx, Settings};
use raftlock_jepsen::{check_history, CheckOptions, Value, Verdict, Workload, F};
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::sync::watch;

const TTL_MS: u64 = 3_000;
/// D's acquire waits this long at most; the majority needs about an
/// election (≤ 1.2 s here) plus a TTL to expire C's session.
const D_WAIT_MS: u64 = 15_000;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// One acquire, recorded; the token when granted.
async fn acquire(ctx: &Ctx, pid: u64, node: u64, session: &str, wait_ms: u64) -> Option<u64> {
    let call = Call {
        pid,
        f: F::Acquire,
        key: ctx.settings.lock.clone(),
        value: Value::Nil,
        token: None,
    };
    ctx.log.invoke(&call);
    match ctx
        .client_api
        .acquire(node, &ctx.settings.lock, session, wait_ms)
        .await
    {
        Reply::Ok(token) => {
            let granted = Call {
                token: Some(token),
                ..call
            };
            ctx.log.ok(&granted, Value::Nil);
            Some(token)
        }
        Reply::Fail(e) => {
            ctx.log.fail(&call, &e.text());
            None
        }
        Reply::Info(e) => {
            ctx.log.info(&call, &e.text());
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs target/debug/raftlock (or RAFTLOCK_BIN): run jepsen/ci.sh"]
async fn an_isolated_leader_does_not_keep_a_lost_holder_holding() {
    let bin = default_raftlock_bin();
    assert!(
        bin.is_file(),
        "{} is missing: build it first with `cargo build -p raftlock-cli`",
        bin.display()
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("isolated-leader");
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = Cluster::start(&ClusterOptions {
        nodes: 3,
        spares: 0,
        bin: bin.clone(),
        member_bin: None,
        embedded: false,
        log_dir: dir.clone(),
        timing: ClusterTiming::default(),
        zookeeper: false,
        etcd: false,
        data_tmpfs_mb: None,
    })
    .await
    .expect("start the cluster");
    let leader = cluster
        .wait_healthy(Duration::from_secs(60))
        .await
        .expect("a healthy cluster");
    let follower = cluster.ids.iter().copied().find(|&i| i != leader).unwrap();

    // Three clients, client i attached to member i + 1 and never moving
    // (the embedded routing rule over the public API): C on the leader,
    // D on a follower.
    let log = Arc::new(RunLog::new());
    let (_stop_tx, stop_rx) = watch::channel(false);
    let settings = Settings {
        ttl_ms: TTL_MS,
        ..Settings::default()
    };
    let ctx = Arc::new(Ctx::new(
        Arc::clone(&log),
        cluster.api.clone(),
        cluster.api.clone(),
        Arc::clone(&cluster.roster),
        settings,
        (3, Routing::Embedded),
        stop_rx,
    ));
    let (c_idx, d_idx) = ((leader - 1) as usize, (follower - 1) as usize);
    let mut rng = StdRng::seed_from_u64(10);

    let c_pid = ctx.next_pid();
    let c = Session::open(&ctx, c_idx, c_pid, &mut rng)
        .await
        .expect("C opens a session on the leader");
    assert!(
        acquire(&ctx, c_pid, leader, &c.id, 5_000).await.is_some(),
        "C must get the free lock"
    );
    let cut_at = log.now();
    cluster.net.apply(
        grouped(&[
            vec![leader],
            cluster
                .ids
                .clone()
                .into_iter()
                .filter(|&i| i != leader)
                .collect(),
        ]),
        LinkState::Drop,
    );

    let d_pid = ctx.next_pid();
    let d = tokio::time::timeout(
        Duration::from_secs(20),
        Session::open(&ctx, d_idx, d_pid, &mut rng),
    )
    .await
    .ok()
    .flatten()
    .expect("D opens a session on the majority side");
    let d_token = acquire(&ctx, d_pid, follower, &d.id, D_WAIT_MS).await;
    let d_done = log.now();
    let c_lost = c.lost_at(&ctx);

    cluster.net.heal();
    // Record both sessions' ends (C's at its loss instant) and judge the
    // history with the mutex checker.
    let c_end = match c_lost {
        Some((_, why)) => End::Lost(why),
        None => End::Quiet,
    };
    c.end(&ctx, ctx.next_pid(), c_end, &mut rng).await;
    d.end(&ctx, ctx.next_pid(), End::Quiet, &mut rng).await;
    cluster.shutdown().await;
    let history = log.history().expect("a well-formed history");
    let results = check_history(
        &history,
        &CheckOptions {
            workload: Some(Workload::Mutex),
            linear: LinearConfig::default(),
        },
    )
    .expect("checkable");
    let verdict = results[0].verdict;
    let explanation = results[0].explanation.clone().unwrap_or_default();

    let story = format!(
        "raftlock binary {}; leader n{leader} cut off at {:.0} ms; C (on n{leader}) lost: {}; \
         D (on n{follower}) acquire: {} at {:.0} ms; mutex checker: {verdict:?}\n{explanation}\n\
         node logs in {}",
        bin.display(),
        ms(cut_at),
        c_lost.map_or("never".to_string(), |(t, why)| format!(
            "{why:?} at {:.0} ms",
            ms(t)
        )),
        d_token.map_or("not granted".to_string(), |t| format!("granted token {t}")),
        ms(d_done),
        dir.display()
    );
    println!("{story}");
    assert!(
        d_token.is_some(),
        "the majority never granted the lock to D within {D_WAIT_MS} ms: {story}"
    );
    match c_lost {
        Some((t, _)) if t <= d_done => {}
        _ => panic!(
            "two holders: C still held the lock (its isolated leader kept renewing its \
             session) when D was granted: {story}"
        ),
    }
    assert_eq!(verdict, Verdict::Valid, "{story}");
}
