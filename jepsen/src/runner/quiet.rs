//! The quiet phase after the faults: the cluster must recover on its own.
//!
//! Every fault is healed first; then every member must answer
//! `/v1/health` and agree on a leader, the final reads must succeed
//! (`register`: every key used, linearizably; `fenced`: the counter), and
//! for the lock workloads the lock must come free once every session is
//! closed or expired. No member may have exited on its own during the
//! run. The outcome is a `recovery` checker result in the report.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::api::Reply;
use crate::checker::{CheckResult, Verdict, Workload};
use crate::control::Cluster;
use crate::history::{Value, F};
use crate::runlog::Call;
use crate::workload::etcd_mutex::AuditLog;
use crate::workload::register::{self, Outcome};
use crate::workload::Ctx;

/// How long the healed cluster gets to become healthy.
const RECOVERY: Duration = Duration::from_secs(45);
/// How long the lock gets to come free after the clients are done.
const LOCK_FREE: Duration = Duration::from_secs(15);
/// Attempts per final read.
const READ_ATTEMPTS: usize = 20;

/// Runs the quiet phase (everything was healed at `healed`) and judges it.
pub async fn phase(
    cluster: &Cluster,
    ctx: &Ctx,
    workload: Workload,
    healed: Instant,
) -> CheckResult {
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    match cluster.wait_healthy(RECOVERY).await {
        Ok(leader) => notes.push(format!(
            "{} nodes healthy {:.1} s after healing, leader n{leader}",
            cluster.members().len(),
            healed.elapsed().as_secs_f64()
        )),
        Err(p) => problems.push(format!(
            "not recovered {} s after healing: {p}",
            RECOVERY.as_secs()
        )),
    }
    match workload {
        Workload::Register => {
            let keys = ctx.keys.used();
            let mut ok = 0;
            for key in &keys {
                if final_read(cluster, ctx, key).await {
                    ok += 1;
                } else {
                    problems.push(format!("final read of {key} failed {READ_ATTEMPTS} times"));
                }
            }
            notes.push(format!("final reads {ok}/{}", keys.len()));
        }
        Workload::MultiLock => match final_audit(cluster, ctx).await {
            Ok(()) => notes.push("final read of every balance".into()),
            Err(p) => problems.push(p),
        },
        Workload::RwLock | Workload::Semaphore => {
            // The mutex's lock-free probe reads /v1/locks, which this
            // workload never touches: recovery alone is checked here.
        }
        Workload::Fenced
        | Workload::Mutex
        | Workload::LockDelay
        | Workload::ZkMutex
        | Workload::EtcdMutex => {
            if matches!(
                workload,
                Workload::Fenced | Workload::ZkMutex | Workload::EtcdMutex
            ) {
                let call = Call {
                    pid: ctx.next_pid(),
                    f: F::Read,
                    key: ctx.settings.counter.clone(),
                    value: Value::Nil,
                    token: None,
                };
                ctx.log.invoke(&call);
                let value = ctx.store.value();
                ctx.log.ok(&call, value);
                notes.push(format!("final counter {value}"));
            }
            let free = match workload {
                Workload::ZkMutex => zk_lock_comes_free(cluster, ctx).await,
                Workload::EtcdMutex => etcd_lock_comes_free(cluster, ctx).await,
                _ => lock_comes_free(cluster, ctx).await,
            };
            match free {
                Ok(()) => notes.push("lock free at the end".into()),
                Err(p) => problems.push(p),
            }
        }
    }
    for (id, crash) in cluster.crashed().await {
        problems.push(format!("node {id} exited on its own: {crash}"));
    }
    let verdict = if problems.is_empty() {
        Verdict::Valid
    } else {
        Verdict::Invalid
    };
    let mut summary = notes.join("; ");
    if !problems.is_empty() {
        summary = format!("{} problem(s); {summary}", problems.len());
    }
    CheckResult {
        checker: "recovery".into(),
        verdict,
        summary,
        explanation: (!problems.is_empty()).then(|| problems.join("\n")),
        highlight: Vec::new(),
        details: json!({ "notes": notes, "problems": problems }),
    }
}

/// A recorded linearizable read of `key`, retried on other nodes (each
/// attempt by a fresh process) until one is ok.
async fn final_read(cluster: &Cluster, ctx: &Ctx, key: &str) -> bool {
    for attempt in 0..READ_ATTEMPTS {
        let Some(node) = cluster.roster.nth(attempt) else {
            return false;
        };
        if register::read(ctx, ctx.next_pid(), node, key).await == Outcome::Ok {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// The `multilock` workload's final read of every balance, under a
/// multi-lock of every account, tried on each member in turn.
async fn final_audit(cluster: &Cluster, ctx: &Ctx) -> Result<(), String> {
    let mut last = String::from("no member");
    for attempt in 0..READ_ATTEMPTS {
        let Some(node) = cluster.roster.nth(attempt) else {
            break;
        };
        match crate::workload::multilock::final_audit(ctx, node).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("the final read of every balance failed: {last}"))
}

/// Waits until the `zk-mutex` lock directory has no node left, listed
/// through the members' ZooKeeper doors in turn.
async fn zk_lock_comes_free(cluster: &Cluster, ctx: &Ctx) -> Result<(), String> {
    let deadline = Instant::now() + LOCK_FREE;
    let mut last = String::from("no answer");
    let mut attempt = 0;
    while Instant::now() < deadline {
        let Some(node) = cluster.roster.nth(attempt) else {
            break;
        };
        attempt += 1;
        match crate::workload::zk_mutex::lock_is_free(ctx, node).await {
            Ok(true) => return Ok(()),
            Ok(false) => last = "nodes left in the lock directory".into(),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "lock directory {} not empty {} s after every session ended: {last}",
        crate::workload::zk_mutex::lock_dir(ctx),
        LOCK_FREE.as_secs()
    ))
}

/// Waits until no key is left under the `etcd-mutex` lock's prefix, read
/// through the members' etcd doors in turn.
async fn etcd_lock_comes_free(cluster: &Cluster, ctx: &Ctx) -> Result<(), String> {
    let deadline = Instant::now() + LOCK_FREE;
    let mut last = String::from("no answer");
    let mut attempt = 0;
    while Instant::now() < deadline {
        let Some(node) = cluster.roster.nth(attempt) else {
            break;
        };
        attempt += 1;
        match crate::workload::etcd_mutex::lock_is_free(ctx, node).await {
            Ok(true) => return Ok(()),
            Ok(false) => last = "keys left under the lock's prefix".into(),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "keys left under {} {} s after every lease ended: {last}",
        crate::workload::etcd_mutex::lock_prefix(ctx),
        LOCK_FREE.as_secs()
    ))
}

/// The `etcd-mutex` grants read back from the door's history: those the
/// auditor read during the run (`log`), and the rest now, through the
/// members' doors in turn ([`crate::checker::lease_grant`], check 2).
pub async fn etcd_audit(cluster: &Cluster, ctx: &Ctx, log: &AuditLog) -> CheckResult {
    // What the last member that answered could not read, or why none did.
    let mut left: Option<Vec<String>> = None;
    let mut last = String::from("no member");
    for attempt in 0..READ_ATTEMPTS {
        let Some(node) = cluster.roster.nth(attempt) else {
            break;
        };
        match crate::workload::etcd_mutex::audit(ctx, node, log).await {
            Ok(unread) if unread.is_empty() => {
                left = Some(unread);
                break;
            }
            Ok(unread) => left = Some(unread),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let unchecked = left.unwrap_or_else(|| vec![format!("no member answered the audit: {last}")]);
    let (checked, problems) = log.found();
    crate::checker::lease_grant::audit_result(checked, unchecked, problems)
}

/// Waits until the lock has neither holder nor waiters.
async fn lock_comes_free(cluster: &Cluster, ctx: &Ctx) -> Result<(), String> {
    let deadline = Instant::now() + LOCK_FREE;
    let mut last = String::from("no answer");
    let mut attempt = 0;
    while Instant::now() < deadline {
        let Some(node) = cluster.roster.nth(attempt) else {
            break;
        };
        attempt += 1;
        match ctx.api.lock_state(node, &ctx.settings.lock).await {
            Reply::Ok((None, 0)) => return Ok(()),
            Reply::Ok((holder, waiters)) => {
                last = format!("holder {holder:?}, {waiters} waiter(s)");
            }
            Reply::Fail(e) | Reply::Info(e) => last = e.text(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "lock {} not free {} s after every session ended: {last}",
        ctx.settings.lock,
        LOCK_FREE.as_secs()
    ))
}
