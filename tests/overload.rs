//! Overload against three real `raftlock serve` processes: a crowd of waiting acquires on one lock, a flood of open
//! connections, a storm of session renewals at a 1 s TTL, and slowloris
//! clients. In each, every member stays up, its memory stays under a
//! stated bound, the excess is refused with `429`/`503` and `Retry-After`,
//! and a lock held before the load is still held, with the same token,
//! by a holder whose keepalives never missed its TTL.
//!
//! What bounds each case (docs/overload.md): `api.max_connections`
//! (connections, hence requests in flight per member), `api.max_waiters_per_lock`,
//! `api.header_read_timeout_ms`. The quick versions (CI) set the limits
//! low so that they are hit; the full-size versions (`#[ignore]`d, run by
//! scripts/overload.sh with `ulimit -n` raised) use the defaults and the
//! counts of the issue, and print the figures recorded in docs/overload.md.
//! The full-size versions pin the members to one core and this process to
//! another when there are two (`support::pin`), so that the load
//! generator's CPU use is not counted as the members' starvation.

mod support;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use support::load::{
    get_raw, open_files_limit, read_answer, route_timing, Holder, Sampler, Tally, Usage,
};
use support::ProcessCluster;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// The TTL of the holder whose lock must survive every case.
const HOLDER_TTL_MS: u64 = 3_000;

/// One cluster at a time: the machine may have two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A three-member cluster with `api` appended to its config, and its
/// leader. With `pin` (the full-size cases) and two cores, the members
/// run on one core and this process on the other (`support::pin`;
/// `OVERLOAD_PIN=0` turns it off).
async fn cluster(api: &str, pin: bool) -> (ProcessCluster, u64, Vec<u64>) {
    let mut cluster = ProcessCluster::configure(3);
    let wanted = pin && std::env::var("OVERLOAD_PIN").map_or(true, |v| v != "0");
    if wanted && support::pin::can_pin() {
        support::pin::pin_process(support::pin::LOAD_CPU).expect("pin the load generator");
        cluster.pin_members(support::pin::MEMBER_CPU);
        println!(
            "OVERLOAD pinning: members on CPU {}, the load generator and the holder on CPU {}",
            support::pin::MEMBER_CPU,
            support::pin::LOAD_CPU
        );
    } else {
        println!("OVERLOAD pinning: none (asked: {wanted})");
    }
    // More `[api]` keys for a measurement (`OVERLOAD_API="key = value"`),
    // e.g. to compare a limit's settings under the same load.
    let api = match std::env::var("OVERLOAD_API") {
        Ok(extra) if api.contains("[api]") => format!("{api}{extra}\n"),
        Ok(extra) => format!("{api}[api]\n{extra}\n"),
        Err(_) => api.to_string(),
    };
    cluster.append_config(&api);
    for id in 1..=3 {
        cluster.start_member(id);
    }
    let leader = cluster.leader(&[1, 2, 3]).await;
    let others: Vec<u64> = (1..=3).filter(|&m| m != leader).collect();
    (cluster, leader, others)
}

fn address(cluster: &ProcessCluster, id: u64) -> String {
    cluster
        .url(id, "")
        .trim_start_matches("http://")
        .to_string()
}

/// Prints what each member used.
fn print_usage(case: &str, usage: &[Usage], took: Duration) {
    for u in usage {
        println!("OVERLOAD {case}: {u} over {:.1} s", took.as_secs_f64());
    }
}

/// Each member's own timing of keepalives and opens (its `/metrics`).
async fn print_route_timings(case: &str, cluster: &ProcessCluster) {
    for id in 1..=3 {
        for (method, route) in [
            ("POST", "/v1/sessions/{id}/keepalive"),
            ("POST", "/v1/sessions"),
        ] {
            match route_timing(cluster, id, method, route).await {
                Some(line) => println!("OVERLOAD {case}: {line}"),
                None => println!("OVERLOAD {case}: n{id} /metrics did not answer"),
            }
        }
    }
}

/// Members up, peak RSS of each under `bound_mib` (the load generator,
/// id 0, is not checked).
fn check_usage(case: &str, usage: &[Usage], bound_mib: u64) {
    for u in usage.iter().filter(|u| u.id != 0) {
        assert!(u.alive, "{case}: member n{} exited", u.id);
        assert!(
            u.peak_rss_kib < bound_mib * 1024,
            "{case}: n{} peaked at {} KiB, over the bound of {bound_mib} MiB",
            u.id,
            u.peak_rss_kib
        );
    }
}

/// A size from the environment, else `default` (the full-size cases).
fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn needs_files(n: u64) {
    let limit = open_files_limit();
    assert!(
        limit >= n,
        "open files limit {limit} < {n}: raise it (`ulimit -n {n}`; scripts/overload.sh does)"
    );
}

// ---------------------------------------------------------------------------
// Connections

struct Connections {
    /// Members on one core, the load generator on another (`cluster`).
    pin: bool,
    /// `[api]` table.
    api: &'static str,
    cap: u64,
    conns: usize,
    hold: Duration,
    /// How often a kept connection sends a request (under the header
    /// timeout, which is also the idle timeout).
    every: Duration,
    bound_mib: u64,
}

/// `conns` clients connect to the leader at once and each sends `GET
/// /v1/health`; those admitted keep their connection busy for `hold`.
async fn connections(case: Connections) {
    needs_files(case.conns as u64 + 1_000);
    let (cluster, leader, others) = cluster(case.api, case.pin).await;
    let holder = Holder::start(&cluster, leader, &others, "held", HOLDER_TTL_MS).await;
    let sampler = Sampler::start(&cluster, &[1, 2, 3]);
    let addr = address(&cluster, leader);
    let first = Arc::new(Mutex::new(Tally::default()));
    let later = Arc::new(Mutex::new(Tally::default()));
    let answered = Arc::new(AtomicUsize::new(0));
    let all_answered = Arc::new(tokio::sync::Notify::new());
    let connecting = Arc::new(Semaphore::new(500));
    let until = tokio::time::Instant::now() + case.hold;
    let mut tasks = Vec::new();
    for _ in 0..case.conns {
        let (addr, first, later) = (addr.clone(), first.clone(), later.clone());
        let (answered, all_answered, connecting) =
            (answered.clone(), all_answered.clone(), connecting.clone());
        let total = case.conns;
        let every = case.every;
        tasks.push(tokio::spawn(async move {
            let permit = connecting.acquire_owned().await.expect("semaphore");
            let stream = TcpStream::connect(&addr).await;
            drop(permit);
            let answer = match stream {
                Ok(mut stream) => {
                    let a = get_raw(&mut stream, "/v1/health", Duration::from_secs(20)).await;
                    Some((stream, a))
                }
                Err(_) => None,
            };
            let kept = match answer {
                Some((stream, a)) => {
                    let ok = a.as_ref().is_some_and(|a| a.status == 200);
                    first.lock().expect("tally").add(&a);
                    ok.then_some(stream)
                }
                None => {
                    *first
                        .lock()
                        .expect("tally")
                        .by_status
                        .entry("connect".into())
                        .or_default() += 1;
                    None
                }
            };
            if answered.fetch_add(1, Ordering::SeqCst) + 1 == total {
                all_answered.notify_one();
            }
            if let Some(mut stream) = kept {
                let mut next = tokio::time::Instant::now() + every;
                while next < until && tokio::time::Instant::now() < until {
                    tokio::time::sleep_until(next).await;
                    let a = get_raw(&mut stream, "/v1/health", Duration::from_secs(20)).await;
                    let closed = a.is_none();
                    later.lock().expect("tally").add(&a);
                    if closed {
                        break;
                    }
                    next += every;
                }
            }
        }));
    }
    // Every client has its first answer: this many connections are open.
    let waited = all_answered.notified();
    if answered.load(Ordering::SeqCst) < case.conns {
        waited.await;
    }
    let opened_at = Instant::now();
    for t in tasks {
        t.await.expect("client task");
    }
    let held_for = opened_at.elapsed();
    let (usage, took) = sampler.finish();
    let first = std::mem::take(&mut *first.lock().expect("tally"));
    let later = std::mem::take(&mut *later.lock().expect("tally"));
    println!(
        "OVERLOAD connections: {} clients to the leader (cap {}): first answers {first}; \
         kept connections' answers over {:.1} s: {later}",
        case.conns,
        case.cap,
        held_for.as_secs_f64()
    );
    // After the flood the slots are free again, once the member has seen
    // the clients' connections close (a client honouring Retry-After, as
    // `Holder::finish` does; a loaded leader may also be briefly behind
    // on applying, `not_caught_up`).
    let mut tries = 0;
    let (status, body) = loop {
        let (status, body) = cluster.get(leader, "/v1/health").await;
        tries += 1;
        if status != 503 || tries == 10 {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(
        status, 200,
        "the leader serves again after the flood ({tries} tries): {body}"
    );
    print_usage("connections", &usage, took);
    let (record, lock) = holder_done(holder, &cluster, &others).await;
    println!("OVERLOAD connections: holder keepalives {record}");
    check_usage("connections", &usage, case.bound_mib);
    // The holder's own connection to the leader may hold a slot.
    assert!(
        first.count("200") <= case.cap,
        "more connections served than the cap: {first}"
    );
    assert!(first.count("503") > 0, "the cap was never hit: {first}");
    let known: u64 = ["200", "503", "closed", "connect"]
        .iter()
        .map(|k| first.count(k))
        .sum();
    assert_eq!(
        known, case.conns as u64,
        "other answers than 200 or 503: {first}"
    );
    assert_eq!(
        first.refused_without_retry_after + later.refused_without_retry_after,
        0,
        "a 429/503 without Retry-After"
    );
    assert_eq!(
        later.count("closed"),
        0,
        "a kept connection was dropped: {later}"
    );
    let _ = lock;
}

async fn holder_done(
    holder: Holder,
    cluster: &ProcessCluster,
    others: &[u64],
) -> (support::load::KeepaliveRecord, serde_json::Value) {
    let session = holder.session.clone();
    let token = holder.token;
    let lock_name = holder.lock.clone();
    let (record, lock) = holder.finish(cluster, others[0]).await;
    assert!(!record.lost, "the holder's session was lost: {record}");
    assert_eq!(
        lock["holder"]["session_id"].as_str(),
        Some(session.as_str()),
        "lock {lock_name} changed hands: {lock}"
    );
    assert_eq!(lock["holder"]["fencing_token"].as_u64(), Some(token));
    assert!(
        record.max_gap_ms < HOLDER_TTL_MS,
        "a keepalive gap of {} ms reached the holder's TTL: {record}",
        record.max_gap_ms
    );
    (record, lock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_is_capped_and_refused_with_503() {
    let _one = ONE_AT_A_TIME.lock().await;
    connections(Connections {
        pin: false,
        api: "[api]\nmax_connections = 20\n",
        cap: 20,
        conns: 60,
        hold: Duration::from_secs(3),
        every: Duration::from_millis(500),
        bound_mib: 512,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size: scripts/overload.sh"]
async fn full_ten_thousand_connections() {
    let _one = ONE_AT_A_TIME.lock().await;
    connections(Connections {
        pin: true,
        api: "",
        cap: 8_192,
        conns: 10_000,
        hold: Duration::from_secs(30),
        every: Duration::from_secs(3),
        bound_mib: 1_024,
    })
    .await;
}

// ---------------------------------------------------------------------------
// Waiting acquires

struct Waiters {
    /// Members on one core, the load generator on another (`cluster`).
    pin: bool,
    api: &'static str,
    max_waiters: u64,
    acquires: usize,
    /// Long polls in flight at once, over the three members.
    concurrency: usize,
    wait_ms: u64,
    bound_mib: u64,
}

/// Opens `acquires` sessions, then sends each one's waiting acquire on
/// the held lock, `concurrency` at a time.
async fn waiters(case: Waiters) {
    needs_files(case.concurrency as u64 + 1_000);
    let (cluster, leader, others) = cluster(case.api, case.pin).await;
    let holder = Holder::start(&cluster, leader, &others, "hot", HOLDER_TTL_MS).await;
    let sampler = Sampler::start(&cluster, &[1, 2, 3]);
    let started = Instant::now();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(case.wait_ms + 30_000))
        .pool_idle_timeout(Duration::from_secs(5))
        .build()
        .expect("http client");
    // Sessions with a TTL long enough to need no keepalives.
    let opening = Arc::new(Semaphore::new(200));
    let mut opens = Vec::new();
    for i in 0..case.acquires {
        let url = cluster.url(1 + (i % 3) as u64, "/v1/sessions");
        let (http, opening) = (http.clone(), opening.clone());
        opens.push(tokio::spawn(async move {
            let _permit = opening.acquire_owned().await.expect("semaphore");
            for _ in 0..20 {
                let r = http
                    .post(&url)
                    .json(&json!({"ttl_ms": 600_000, "owner": "waiter"}))
                    .send()
                    .await;
                if let Ok(r) = r {
                    if r.status().as_u16() == 201 {
                        let body: serde_json::Value = r.json().await.unwrap_or_default();
                        return body["session_id"].as_str().map(str::to_string);
                    }
                }
            }
            None
        }));
    }
    let mut sessions = Vec::new();
    for o in opens {
        sessions.extend(o.await.expect("open task"));
    }
    let opened_in = started.elapsed();
    assert_eq!(
        sessions.len(),
        case.acquires,
        "could not open every session"
    );
    // Watches the queue length while the crowd waits.
    let max_queue = Arc::new(AtomicU64::new(0));
    let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (max_queue, watching) = (max_queue.clone(), watching.clone());
        let url = cluster.url(others[0], "/v1/locks/hot");
        let http = http.clone();
        tokio::spawn(async move {
            while watching.load(Ordering::Relaxed) {
                if let Ok(r) = http.get(&url).send().await {
                    let lock: serde_json::Value = r.json().await.unwrap_or_default();
                    let n = lock["waiters"].as_array().map_or(0, Vec::len) as u64;
                    max_queue.fetch_max(n, Ordering::Relaxed);
                }
                // A measurement's sampling period.
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let tally = Arc::new(Mutex::new(Tally::default()));
    let slots = Arc::new(Semaphore::new(case.concurrency));
    let crowd_started = Instant::now();
    let mut tasks = Vec::new();
    for (i, session) in sessions.into_iter().enumerate() {
        let url = cluster.url(1 + (i % 3) as u64, "/v1/locks/hot/acquire");
        let (http, slots, tally) = (http.clone(), slots.clone(), tally.clone());
        let wait_ms = case.wait_ms;
        tasks.push(tokio::spawn(async move {
            let _slot = slots.acquire_owned().await.expect("semaphore");
            let r = http
                .post(&url)
                .json(&json!({"session_id": session, "wait_ms": wait_ms}))
                .send()
                .await;
            let mut t = tally.lock().expect("tally");
            match r {
                Ok(r) => {
                    let status = r.status().as_u16();
                    if matches!(status, 429 | 503) && r.headers().get("retry-after").is_none() {
                        t.refused_without_retry_after += 1;
                    }
                    *t.by_status.entry(status.to_string()).or_default() += 1;
                }
                Err(_) => *t.by_status.entry("error".into()).or_default() += 1,
            }
        }));
    }
    for t in tasks {
        t.await.expect("acquire task");
    }
    let crowd_took = crowd_started.elapsed();
    println!(
        "OVERLOAD waiters: the crowd ran from t={} to t={} ms of the holder's timeline",
        crowd_started.duration_since(holder.started).as_millis(),
        holder.started.elapsed().as_millis()
    );
    watching.store(false, Ordering::Relaxed);
    let _ = watcher.await;
    drop(http);
    let (usage, took) = sampler.finish();
    let tally = std::mem::take(&mut *tally.lock().expect("tally"));
    let max_queue = max_queue.load(Ordering::Relaxed);
    println!(
        "OVERLOAD waiters: {} sessions opened in {:.1} s; {} waiting acquires \
         ({} at once, wait_ms {}) in {:.1} s: {tally}; longest queue seen {max_queue} \
         (api.max_waiters_per_lock {})",
        case.acquires,
        opened_in.as_secs_f64(),
        case.acquires,
        case.concurrency,
        case.wait_ms,
        crowd_took.as_secs_f64(),
        case.max_waiters
    );
    print_usage("waiters", &usage, took);
    print_route_timings("waiters", &cluster).await;
    let (record, _) = holder_done(holder, &cluster, &others).await;
    println!("OVERLOAD waiters: holder keepalives {record}");
    check_usage("waiters", &usage, case.bound_mib);
    // The quick case's crowd fits the in-flight limit, so the waiter limit
    // is what refuses it; the full-size crowd (4,000 long polls per member)
    // passes the default in-flight limit (1,024 per member) first, which
    // answers 503 overloaded (a long poll holds its slot while it waits).
    if case.acquires > 1_000 {
        assert!(
            tally.count("429") + tally.count("503") > 0,
            "the excess was never refused: {tally}"
        );
    } else {
        assert!(
            tally.count("429") > 0,
            "the waiter limit was never hit: {tally}"
        );
    }
    assert_eq!(
        tally.refused_without_retry_after, 0,
        "a 429/503 without Retry-After"
    );
    assert_eq!(
        tally.count("200"),
        0,
        "a waiter was granted a held lock: {tally}"
    );
    // Checked at the edge against a stale count: concurrent acquires can
    // overshoot by as many as are in flight (limits.rs), never more.
    assert!(
        max_queue <= case.max_waiters + case.concurrency as u64,
        "the queue grew past limit + in flight: {max_queue}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_of_waiters_is_capped_with_429() {
    let _one = ONE_AT_A_TIME.lock().await;
    waiters(Waiters {
        pin: false,
        api: "[api]\nmax_waiters_per_lock = 40\n",
        max_waiters: 40,
        acquires: 300,
        concurrency: 90,
        wait_ms: 2_000,
        bound_mib: 512,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size: scripts/overload.sh"]
async fn full_hundred_thousand_waiting_acquires() {
    let _one = ONE_AT_A_TIME.lock().await;
    waiters(Waiters {
        pin: true,
        api: "",
        max_waiters: 10_000,
        acquires: 100_000,
        concurrency: 12_000,
        wait_ms: 20_000,
        bound_mib: 2_048,
    })
    .await;
}

// ---------------------------------------------------------------------------
// Renewals at a 1 s TTL

struct Renewals {
    /// Members on one core, the load generator on another (`cluster`).
    pin: bool,
    api: &'static str,
    sessions: usize,
    /// Requests in flight at once per member (above the connection cap to
    /// hit it).
    per_member: usize,
    hold: Duration,
    bound_mib: u64,
}

/// `sessions` sessions with a 1 s TTL, each renewed every 333 ms (and
/// reopened when it expired) for `hold`.
async fn renewals(case: Renewals) {
    needs_files(3 * case.per_member as u64 + 1_000);
    let (cluster, leader, others) = cluster(case.api, case.pin).await;
    let holder = Holder::start(&cluster, leader, &others, "held", HOLDER_TTL_MS).await;
    let sampler = Sampler::start(&cluster, &[1, 2, 3]);
    // Idle connections are closed by the client after 1 s, before the
    // member's idle deadline: otherwise thousands of connections the member
    // closed sit in CLOSE-WAIT in the pool, holding descriptors.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(1))
        .build()
        .expect("http client");
    let slots: Vec<Arc<Semaphore>> = (0..3)
        .map(|_| Arc::new(Semaphore::new(case.per_member)))
        .collect();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let renewed = Arc::new(AtomicU64::new(0));
    let reopened = Arc::new(AtomicU64::new(0));
    let until = tokio::time::Instant::now() + case.hold;
    let started = Instant::now();
    let storm_from = holder.started.elapsed();
    let mut tasks = Vec::new();
    for i in 0..case.sessions {
        let member = 1 + (i % 3) as u64;
        let open_url = cluster.url(member, "/v1/sessions");
        let base = cluster.url(member, "/v1/sessions/");
        let (http, slot, tally) = (http.clone(), slots[i % 3].clone(), tally.clone());
        let (renewed, reopened) = (renewed.clone(), reopened.clone());
        tasks.push(tokio::spawn(async move {
            let record = |r: &Result<reqwest::Response, reqwest::Error>| {
                let mut t = tally.lock().expect("tally");
                match r {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        if matches!(status, 429 | 503) && r.headers().get("retry-after").is_none() {
                            t.refused_without_retry_after += 1;
                        }
                        *t.by_status.entry(status.to_string()).or_default() += 1;
                    }
                    Err(e) => {
                        let kind = if e.is_timeout() {
                            "timeout"
                        } else if e.is_connect() {
                            "connect"
                        } else {
                            static SHOWN: AtomicU64 = AtomicU64::new(0);
                            if SHOWN.fetch_add(1, Ordering::Relaxed) < 3 {
                                println!("OVERLOAD renewals: error {e:?}");
                            }
                            "error"
                        };
                        *t.by_status.entry(kind.into()).or_default() += 1;
                    }
                }
            };
            let mut session: Option<String> = None;
            let mut next = tokio::time::Instant::now();
            // Ends at the deadline, however far behind schedule the
            // renewals fell (a missed renewal is skipped, not made up).
            while tokio::time::Instant::now() < until {
                tokio::time::sleep_until(next).await;
                next = (next + Duration::from_millis(333)).max(tokio::time::Instant::now());
                let Ok(slot) = tokio::time::timeout_at(until, slot.acquire()).await else {
                    break;
                };
                let _slot = slot.expect("semaphore");
                match &session {
                    None => {
                        let r = http
                            .post(&open_url)
                            .json(&json!({"ttl_ms": 1_000, "owner": "storm"}))
                            .send()
                            .await;
                        record(&r);
                        if let Ok(r) = r {
                            if r.status().as_u16() == 201 {
                                let body: serde_json::Value = r.json().await.unwrap_or_default();
                                session = body["session_id"].as_str().map(str::to_string);
                                reopened.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Some(id) => {
                        let r = http.post(format!("{base}{id}/keepalive")).send().await;
                        record(&r);
                        match r.map(|r| r.status().as_u16()) {
                            Ok(200) => {
                                renewed.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(404) => session = None,
                            _ => {}
                        }
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("session task");
    }
    let took_storm = started.elapsed();
    let storm_to = holder.started.elapsed();
    // Closes the storm's idle keep-alive connections, which hold slots.
    drop(http);
    let (usage, took) = sampler.finish();
    println!(
        "OVERLOAD renewals: the storm ran from t={} to t={} ms of the holder's timeline",
        storm_from.as_millis(),
        storm_to.as_millis()
    );
    print_route_timings("renewals", &cluster).await;
    let tally = std::mem::take(&mut *tally.lock().expect("tally"));
    println!(
        "OVERLOAD renewals: {} sessions at 1 s TTL renewing every 333 ms for {:.1} s \
         ({} requests in flight per member at most): opens {}, renewals ok {}; answers {tally}",
        case.sessions,
        took_storm.as_secs_f64(),
        case.per_member,
        reopened.load(Ordering::Relaxed),
        renewed.load(Ordering::Relaxed)
    );
    print_usage("renewals", &usage, took);
    let (record, _) = holder_done(holder, &cluster, &others).await;
    println!("OVERLOAD renewals: holder keepalives {record}");
    check_usage("renewals", &usage, case.bound_mib);
    assert!(
        tally.count("503") > 0,
        "the connection cap was never hit: {tally}"
    );
    assert_eq!(
        tally.refused_without_retry_after, 0,
        "a 429/503 without Retry-After"
    );
    assert!(
        renewed.load(Ordering::Relaxed) > 0,
        "no renewal succeeded: {tally}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_storm_at_one_second_ttl_keeps_the_held_lock() {
    let _one = ONE_AT_A_TIME.lock().await;
    renewals(Renewals {
        pin: false,
        api: "[api]\nmax_connections = 30\n",
        sessions: 600,
        per_member: 60,
        hold: Duration::from_secs(6),
        bound_mib: 512,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size: scripts/overload.sh"]
async fn full_fifty_thousand_sessions_renewing_at_one_second_ttl() {
    let _one = ONE_AT_A_TIME.lock().await;
    // The cap is lowered to 4,096 so that 5,000 requests in flight per
    // member hit it within a 20,000 open-files limit (15,000 client
    // connections); docs/overload.md.
    // Smaller storms for finding where this machine loses the lock:
    // OVERLOAD_SESSIONS, OVERLOAD_PER_MEMBER, OVERLOAD_HOLD_S.
    // OVERLOAD_MAX_CONNECTIONS: another cap, for the same measurement.
    let cap = env_or("OVERLOAD_MAX_CONNECTIONS", 4_096);
    let api: &'static str = Box::leak(format!("[api]\nmax_connections = {cap}\n").into_boxed_str());
    renewals(Renewals {
        pin: true,
        api,
        sessions: env_or("OVERLOAD_SESSIONS", 50_000) as usize,
        per_member: env_or("OVERLOAD_PER_MEMBER", 5_000) as usize,
        hold: Duration::from_secs(env_or("OVERLOAD_HOLD_S", 30)),
        bound_mib: 2_048,
    })
    .await;
}

// ---------------------------------------------------------------------------
// Slowloris

struct Slowloris {
    /// Members on one core, the load generator on another (`cluster`).
    pin: bool,
    api: &'static str,
    header_timeout: Duration,
    cap: u64,
    /// Slow clients, each sending one byte per second and reconnecting
    /// when cut off.
    clients: usize,
    hold: Duration,
    bound_mib: u64,
}

/// `clients` connections to the leader, each trickling a request one byte
/// per second; the member must cut each within the header timeout, refuse
/// those over the cap, and come back to serve new connections after.
async fn slowloris(case: Slowloris) {
    needs_files(case.clients as u64 + 1_000);
    let (cluster, leader, others) = cluster(case.api, case.pin).await;
    let holder = Holder::start(&cluster, leader, &others, "held", HOLDER_TTL_MS).await;
    let sampler = Sampler::start(&cluster, &[1, 2, 3]);
    let addr = address(&cluster, leader);
    let until = tokio::time::Instant::now() + case.hold;
    // Longest a trickling connection lived (ms), connections cut, refused.
    let longest = Arc::new(AtomicU64::new(0));
    let cut = Arc::new(AtomicU64::new(0));
    let refusals = Arc::new(Mutex::new(Tally::default()));
    let connecting = Arc::new(Semaphore::new(500));
    let mut tasks = Vec::new();
    for _ in 0..case.clients {
        let (addr, longest, cut, refusals, connecting) = (
            addr.clone(),
            longest.clone(),
            cut.clone(),
            refusals.clone(),
            connecting.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let request = b"GET /v1/health HTTP/1.1\r\nhost: raftlock\r\nx-slow: 1\r\n\r\n";
            while tokio::time::Instant::now() < until {
                let permit = connecting.acquire().await.expect("semaphore");
                let Ok(mut stream) = TcpStream::connect(&addr).await else {
                    continue;
                };
                drop(permit);
                let opened = Instant::now();
                let mut sent = 0;
                let mut tick = tokio::time::Instant::now();
                // One byte per second until the member cuts us off or the
                // request is complete (it never is before the deadline).
                let ended = loop {
                    if sent == request.len() - 1 || tokio::time::Instant::now() >= until {
                        break false;
                    }
                    if stream.write_all(&request[sent..=sent]).await.is_err() {
                        break true;
                    }
                    sent += 1;
                    tick += Duration::from_secs(1);
                    let mut probe = [0u8; 1];
                    // Wait for the next byte's turn, or for the member to
                    // answer or close first.
                    match tokio::time::timeout_at(tick, stream.peek(&mut probe)).await {
                        Err(_) => {}
                        Ok(Ok(0)) | Ok(Err(_)) => break true,
                        Ok(Ok(_)) => {
                            let a = read_answer(&mut stream).await;
                            refusals.lock().expect("tally").add(&a);
                            // Refused: come back after Retry-After (1 s),
                            // not in a tight loop.
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            break true;
                        }
                    }
                };
                if ended {
                    cut.fetch_add(1, Ordering::Relaxed);
                    longest.fetch_max(opened.elapsed().as_millis() as u64, Ordering::Relaxed);
                }
            }
        }));
    }
    // Meanwhile a client makes a fresh connection every second: served,
    // or refused with 503 while the slow ones fill the cap.
    let mut fresh = Tally::default();
    let mut next = tokio::time::Instant::now();
    while next < until {
        tokio::time::sleep_until(next).await;
        next += Duration::from_secs(1);
        let a = match TcpStream::connect(&addr).await {
            Ok(mut s) => get_raw(&mut s, "/v1/health", Duration::from_secs(5)).await,
            Err(_) => None,
        };
        fresh.add(&a);
    }
    for t in tasks {
        t.await.expect("slow client");
    }
    let (usage, took) = sampler.finish();
    let refusals = std::mem::take(&mut *refusals.lock().expect("tally"));
    let longest = longest.load(Ordering::Relaxed);
    println!(
        "OVERLOAD slowloris: {} clients at 1 byte/s for {:.0} s (header timeout {} ms, cap {}): \
         {} connections cut, longest lived {longest} ms; answers to slow clients {refusals}; \
         fresh connections each second: {fresh}",
        case.clients,
        case.hold.as_secs_f64(),
        case.header_timeout.as_millis(),
        case.cap,
        cut.load(Ordering::Relaxed)
    );
    let (status, _) = cluster.get(leader, "/v1/health").await;
    assert_eq!(
        status, 200,
        "the leader serves again after the slow clients"
    );
    print_usage("slowloris", &usage, took);
    let (record, _) = holder_done(holder, &cluster, &others).await;
    println!("OVERLOAD slowloris: holder keepalives {record}");
    check_usage("slowloris", &usage, case.bound_mib);
    assert!(
        cut.load(Ordering::Relaxed) > 0,
        "no slow connection was cut"
    );
    // Cut within the header timeout, plus a second of trickle and slack.
    assert!(
        longest <= (case.header_timeout + Duration::from_secs(3)).as_millis() as u64,
        "a slow client kept its connection {longest} ms"
    );
    assert_eq!(
        refusals.count("200"),
        0,
        "a trickled request was served: {refusals}"
    );
    assert_eq!(
        refusals.refused_without_retry_after + fresh.refused_without_retry_after,
        0,
        "a 429/503 without Retry-After"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_clients_are_cut_at_the_header_timeout() {
    let _one = ONE_AT_A_TIME.lock().await;
    slowloris(Slowloris {
        pin: false,
        api: "[api]\nheader_read_timeout_ms = 1000\nmax_connections = 20\n",
        header_timeout: Duration::from_millis(1_000),
        cap: 20,
        clients: 30,
        hold: Duration::from_secs(5),
        bound_mib: 512,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full size: scripts/overload.sh"]
async fn full_slowloris() {
    let _one = ONE_AT_A_TIME.lock().await;
    slowloris(Slowloris {
        pin: true,
        api: "",
        header_timeout: Duration::from_millis(10_000),
        cap: 8_192,
        clients: 10_000,
        hold: Duration::from_secs(30),
        bound_mib: 1_024,
    })
    .await;
}
