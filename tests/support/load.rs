//! Tools of the overload tests (tests/overload.rs): what a member process
//! uses (RSS and CPU from /proc), a lock holder that keeps its session
//! alive through the load, and raw HTTP/1 connections for floods.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ProcessCluster;

/// Resident memory of a process now, in KiB (`VmRSS`); `None` once gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmRSS:")
}

/// Peak resident memory over the process's life, in KiB (`VmHWM`).
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmHWM:")
}

fn status_field(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// CPU time (user + system) a process used so far, in seconds.
pub fn cpu_secs(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may contain spaces: state is
    // field 3, utime 14 and stime 15 (proc(5)).
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on every Linux architecture this project builds for.
    Some((utime + stime) / 100.0)
}

/// Time running on a CPU and time runnable but waiting for one, summed
/// over a process's threads, in seconds (`/proc/<pid>/task/*/schedstat`,
/// nanoseconds). The second is what the rest of the machine took from the
/// process: a member that uses little CPU while its threads wait long for
/// one is starved, not idle.
pub fn sched_secs(pid: u32) -> Option<(f64, f64)> {
    let mut run = 0u64;
    let mut wait = 0u64;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(entry) = entry else { continue };
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        let mut fields = text
            .split_whitespace()
            .map(|v| v.parse::<u64>().unwrap_or(0));
        run += fields.next().unwrap_or(0);
        wait += fields.next().unwrap_or(0);
    }
    Some((run as f64 / 1e9, wait as f64 / 1e9))
}

/// The load average over the last minute (`/proc/loadavg`).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// What one member (or, with id 0, this test process: the load
/// generator) used during a phase.
#[derive(Debug, Clone)]
pub struct Usage {
    /// The member; 0 for the test process itself.
    pub id: u64,
    /// Highest RSS sampled during the phase (KiB).
    pub peak_rss_kib: u64,
    /// RSS at the start of the phase (KiB).
    pub start_rss_kib: u64,
    /// CPU seconds used during the phase.
    pub cpu_secs: f64,
    /// Seconds its threads were runnable but waited for a CPU (summed
    /// over threads alive at both ends of the phase).
    pub cpu_wait_secs: f64,
    /// The process still ran at the end.
    pub alive: bool,
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = match self.id {
            0 => "load generator (the test process)".to_string(),
            id => format!("n{id}"),
        };
        write!(
            f,
            "{who}: RSS {:.1} -> peak {:.1} MiB, CPU {:.1} s, waited for a CPU {:.1} s{}",
            self.start_rss_kib as f64 / 1024.0,
            self.peak_rss_kib as f64 / 1024.0,
            self.cpu_secs,
            self.cpu_wait_secs,
            if self.alive { "" } else { ", EXITED" }
        )
    }
}

/// Samples the members' RSS every 100 ms on a thread (a measurement, not a
/// synchronisation) until [`Sampler::finish`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<BTreeMap<u64, u64>>,
    pids: Vec<(u64, u32)>,
    start: BTreeMap<u64, (u64, f64, f64)>,
    started: Instant,
    load_start: f64,
    /// Each CPU's busy and niced time at the start (`pin::cpu_times`).
    cpus_start: Vec<(usize, f64, f64)>,
}

impl Sampler {
    /// Starts sampling members `ids` of `cluster`, and this process (the
    /// load generator, reported with id 0).
    pub fn start(cluster: &ProcessCluster, ids: &[u64]) -> Sampler {
        let mut pids: Vec<(u64, u32)> = ids
            .iter()
            .map(|&id| (id, cluster.pid(id).expect("member runs")))
            .collect();
        pids.push((0, std::process::id()));
        let start = pids
            .iter()
            .map(|&(id, pid)| {
                let waited = sched_secs(pid).map_or(0.0, |(_, w)| w);
                (
                    id,
                    (
                        rss_kib(pid).unwrap_or(0),
                        cpu_secs(pid).unwrap_or(0.0),
                        waited,
                    ),
                )
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            let pids = pids.clone();
            std::thread::spawn(move || {
                let mut peak: BTreeMap<u64, u64> = BTreeMap::new();
                while !stop.load(Ordering::Relaxed) {
                    for &(id, pid) in &pids {
                        let rss = rss_kib(pid).unwrap_or(0);
                        let p = peak.entry(id).or_default();
                        *p = (*p).max(rss);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                peak
            })
        };
        Sampler {
            stop,
            thread,
            pids,
            start,
            started: Instant::now(),
            load_start: load_average(),
            cpus_start: super::pin::cpu_times(),
        }
    }

    /// Stops sampling; what each member (and, last, with id 0, this
    /// process) used since [`Sampler::start`].
    pub fn finish(self) -> (Vec<Usage>, Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let peak = self.thread.join().expect("sampler thread");
        let usage = self
            .pids
            .iter()
            .map(|&(id, pid)| {
                let (start_rss, start_cpu, start_wait) = self.start[&id];
                let alive = process_alive(pid);
                let waited = sched_secs(pid).map_or(0.0, |(_, w)| w);
                Usage {
                    id,
                    peak_rss_kib: peak.get(&id).copied().unwrap_or(0).max(start_rss),
                    start_rss_kib: start_rss,
                    cpu_secs: cpu_secs(pid).map_or(0.0, |c| c - start_cpu),
                    cpu_wait_secs: (waited - start_wait).max(0.0),
                    alive,
                }
            })
            .collect();
        let took = self.started.elapsed().as_secs_f64();
        let cpus: Vec<String> = super::pin::cpu_times()
            .iter()
            .filter_map(|&(cpu, busy, nice)| {
                let &(_, busy0, nice0) = self.cpus_start.iter().find(|c| c.0 == cpu)?;
                Some(format!(
                    "CPU {cpu} busy {:.0}% (niced work {:.0}%)",
                    100.0 * (busy - busy0) / took,
                    100.0 * (nice - nice0) / took
                ))
            })
            .collect();
        println!(
            "OVERLOAD machine: {} cores, load average {:.1} at the start, {:.1} at the end; {}",
            self.cpus_start.len(),
            self.load_start,
            load_average(),
            cpus.join(", ")
        );
        (usage, self.started.elapsed())
    }
}

/// True while `pid` runs (not gone, not a zombie).
pub fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| {
            let rest = &t[t.rfind(')')? + 2..];
            rest.split_whitespace().next().map(|s| s != "Z")
        })
        .unwrap_or(false)
}

/// The soft limit on open files of this process (children inherit it).
pub fn open_files_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

/// A session holding a lock, kept alive every TTL/3 through its member
/// (moving to the others when that one does not answer 200, as a client
/// does), with a record of every keepalive: when it was sent, to which
/// member, how long the answer took and what it was.
///
/// The keepalives run on a thread of their own with its own runtime, as a
/// holder in another process would: on the test's runtime they would
/// queue behind the load generator's tens of thousands of tasks, and a
/// late keepalive would then say more about the generator than about the
/// cluster. `OVERLOAD_HOLDER_ON_LOAD_RUNTIME=1` puts them back on the
/// test's runtime, to measure that difference (docs/overload.md).
pub struct Holder {
    pub session: String,
    pub lock: String,
    pub token: u64,
    /// When the keepalives started: the origin of [`Attempt::at_ms`].
    pub started: Instant,
    stop: Arc<AtomicBool>,
    runner: Runner,
    record: Arc<Mutex<KeepaliveRecord>>,
    ok: Arc<AtomicU64>,
}

enum Runner {
    Thread(std::thread::JoinHandle<()>),
    Task(tokio::task::JoinHandle<()>),
}

/// One keepalive request of the holder.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Sent this long after [`Holder::started`], ms.
    pub at_ms: u64,
    pub member: u64,
    /// Until the answer (or the failure), ms.
    pub took_ms: u64,
    /// `200`, another status with its body, or the client error.
    pub outcome: String,
}

/// How a holder's keepalives went.
#[derive(Debug, Default, Clone)]
pub struct KeepaliveRecord {
    /// Longest time from a successful keepalive to the next one, or to a
    /// round of attempts that all failed (send times), ms.
    pub max_gap_ms: u64,
    /// Answers that were not 200, by member and status.
    pub refused: Vec<String>,
    /// The session was reported gone.
    pub lost: bool,
    /// Every request, in order.
    pub attempts: Vec<Attempt>,
}

impl KeepaliveRecord {
    /// The longest a keepalive that succeeded waited for its answer, ms.
    pub fn slowest_ok_ms(&self) -> u64 {
        self.attempts
            .iter()
            .filter(|a| a.outcome == "200")
            .map(|a| a.took_ms)
            .max()
            .unwrap_or(0)
    }
}

impl std::fmt::Display for KeepaliveRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ok = self.attempts.iter().filter(|a| a.outcome == "200").count();
        write!(
            f,
            "{} requests, {ok} answered 200 (slowest {} ms), longest gap since a success {} ms{}",
            self.attempts.len(),
            self.slowest_ok_ms(),
            self.max_gap_ms,
            if self.lost { ", SESSION LOST" } else { "" }
        )?;
        // The timeline of whatever went wrong or was slow.
        let notable: Vec<&Attempt> = self
            .attempts
            .iter()
            .filter(|a| a.outcome != "200" || a.took_ms >= 200)
            .collect();
        if !notable.is_empty() {
            write!(f, "; failed or slow (t = ms since the first):")?;
        }
        for a in notable.iter().take(40) {
            write!(
                f,
                " [t={} n{} {} ms: {}]",
                a.at_ms, a.member, a.took_ms, a.outcome
            )?;
        }
        if notable.len() > 40 {
            write!(f, " … {} more", notable.len() - 40)?;
        }
        Ok(())
    }
}

impl Holder {
    /// Opens a session with `ttl_ms` through `via`, takes `lock`, and
    /// starts keeping the session alive (first through `via`).
    pub async fn start(
        cluster: &ProcessCluster,
        via: u64,
        others: &[u64],
        lock: &str,
        ttl_ms: u64,
    ) -> Holder {
        let session = cluster.open_session(via, "holder", ttl_ms).await;
        let (status, held) = cluster
            .post(
                via,
                &format!("/v1/locks/{lock}/acquire"),
                json!({"session_id": session, "wait_ms": 0}),
            )
            .await;
        assert_eq!(status, 200, "holder acquire: {held}");
        let token = held["fencing_token"].as_u64().expect("token");
        let mut order = vec![via];
        order.extend_from_slice(others);
        let urls: Vec<(u64, String)> = order
            .iter()
            .map(|&m| {
                (
                    m,
                    cluster.url(m, &format!("/v1/sessions/{session}/keepalive")),
                )
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let record = Arc::new(Mutex::new(KeepaliveRecord::default()));
        let ok = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let keeping = keep_alive(
            urls,
            ttl_ms,
            started,
            (Arc::clone(&stop), Arc::clone(&record), Arc::clone(&ok)),
        );
        let runner = if std::env::var_os("OVERLOAD_HOLDER_ON_LOAD_RUNTIME").is_some() {
            Runner::Task(tokio::spawn(keeping))
        } else {
            let thread = std::thread::Builder::new()
                .name("holder".into())
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("holder runtime");
                    runtime.block_on(keeping);
                })
                .expect("holder thread");
            Runner::Thread(thread)
        };
        Holder {
            session,
            lock: lock.to_string(),
            token,
            started,
            stop,
            runner,
            record,
            ok,
        }
    }

    /// Stops the keepalives; checks through `ask` that the lock is still
    /// this session's, with its token. Returns the record.
    pub async fn finish(self, cluster: &ProcessCluster, ask: u64) -> (KeepaliveRecord, Value) {
        self.stop.store(true, Ordering::Relaxed);
        match self.runner {
            Runner::Task(task) => {
                let _ = task.await;
            }
            Runner::Thread(thread) => {
                let _ = tokio::task::spawn_blocking(move || thread.join()).await;
            }
        }
        let url = cluster.url(ask, &format!("/v1/locks/{}", self.lock));
        // A client honouring Retry-After: the load's idle keep-alive
        // connections may still fill the member's cap for a moment.
        let mut tries = 0;
        let (status, lock) = loop {
            let (status, lock) = match reqwest::get(&url).await {
                Ok(r) => (r.status().as_u16(), r.json().await.unwrap_or(Value::Null)),
                Err(e) => panic!("GET {url}: {e:?}"),
            };
            tries += 1;
            if status != 503 || tries == 15 {
                break (status, lock);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        assert_eq!(status, 200, "{lock}");
        let record = self.record.lock().expect("record").clone();
        assert!(
            self.ok.load(Ordering::Relaxed) > 0,
            "no keepalive of the holder succeeded: {record}"
        );
        (record, lock)
    }
}

/// The holder's keepalive loop: every TTL/3, through the members in
/// order until one answers 200, each with a TTL/3 client timeout.
async fn keep_alive(
    urls: Vec<(u64, String)>,
    ttl_ms: u64,
    started: Instant,
    (stop, record, ok): (Arc<AtomicBool>, Arc<Mutex<KeepaliveRecord>>, Arc<AtomicU64>),
) {
    // Built on the runtime that uses it: its connections live there.
    // `OVERLOAD_HOLDER_FRESH_CONNECTIONS=1`: a new connection for every
    // keepalive, as a holder whose connection was lost must make: it then
    // waits for the member to accept it (docs/overload.md).
    let fresh = std::env::var_os("OVERLOAD_HOLDER_FRESH_CONNECTIONS").is_some();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(ttl_ms / 3))
        .pool_max_idle_per_host(if fresh { 0 } else { usize::MAX })
        .build()
        .expect("http client");
    let mut last_ok = Instant::now();
    let period = Duration::from_millis(ttl_ms / 3);
    let mut next = tokio::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        next += period;
        let sent = Instant::now();
        let mut done = false;
        for (member, url) in &urls {
            let at = Instant::now();
            let answer = http.post(url).send().await;
            let (outcome, is_ok) = match answer {
                Ok(r) if r.status().as_u16() == 200 => ("200".to_string(), true),
                Ok(r) => {
                    let status = r.status().as_u16();
                    let body = r.text().await.unwrap_or_default();
                    let mut rec = record.lock().expect("record");
                    if status == 404 {
                        rec.lost = true;
                    }
                    rec.refused.push(format!("n{member}: {status} {body}"));
                    (format!("{status} {body}"), false)
                }
                Err(e) => {
                    let kind = if e.is_timeout() {
                        "timeout"
                    } else if e.is_connect() {
                        "connect failed"
                    } else {
                        "error"
                    };
                    // The innermost cause (an OS error) says which
                    // resource ran out, reqwest's own text does not.
                    let mut cause: &dyn std::error::Error = &e;
                    while let Some(inner) = cause.source() {
                        cause = inner;
                    }
                    let why = format!("{kind}: {e} ({cause})");
                    record
                        .lock()
                        .expect("record")
                        .refused
                        .push(format!("n{member}: {why}"));
                    (why, false)
                }
            };
            record.lock().expect("record").attempts.push(Attempt {
                at_ms: at.duration_since(started).as_millis() as u64,
                member: *member,
                took_ms: at.elapsed().as_millis() as u64,
                outcome,
            });
            if is_ok {
                done = true;
                break;
            }
        }
        // A failed round counts too: the time since the last success
        // grows, and a holder that never succeeds again must show it.
        let gap = sent.duration_since(last_ok).as_millis() as u64;
        {
            let mut rec = record.lock().expect("record");
            rec.max_gap_ms = rec.max_gap_ms.max(gap);
        }
        if done {
            last_ok = sent;
            ok.fetch_add(1, Ordering::Relaxed);
        }
        // The keepalive schedule of a client (TTL/3), not a wait for some
        // event.
        tokio::time::sleep_until(next.max(tokio::time::Instant::now())).await;
    }
}

/// A member's own timing of one route, from its `/metrics`
/// (`raftlock_http_request_duration_seconds`, measured from routing to
/// the answer: the time a request waited for a connection slot, in the
/// accept queue or for hyper to read it is not in it). `None` when the
/// member did not answer.
pub async fn route_timing(
    cluster: &ProcessCluster,
    id: u64,
    method: &str,
    route: &str,
) -> Option<String> {
    let url = cluster.url(id, "/metrics");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .ok()?;
    let mut text = None;
    for _ in 0..10 {
        match http.get(&url).send().await {
            Ok(r) if r.status().is_success() => {
                text = r.text().await.ok();
                break;
            }
            // Retry-After: 1 (a full member).
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    let text = text?;
    let labels = [format!("method=\"{method}\""), format!("route=\"{route}\"")];
    let mine = |line: &&str| labels.iter().all(|l| line.contains(l.as_str()));
    let value = |line: &str| -> f64 {
        line.rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let mut count = 0.0;
    let mut sum = 0.0;
    let mut buckets = Vec::new();
    for line in text.lines().filter(mine) {
        if line.starts_with("raftlock_http_request_duration_seconds_count") {
            count = value(line);
        } else if line.starts_with("raftlock_http_request_duration_seconds_sum") {
            sum = value(line);
        } else if line.starts_with("raftlock_http_request_duration_seconds_bucket") {
            if let Some(le) = line.split("le=\"").nth(1).and_then(|r| r.split('"').next()) {
                buckets.push((le.to_string(), value(line)));
            }
        }
    }
    let within = |le: &str| {
        buckets
            .iter()
            .find(|(b, _)| b == le)
            .map_or(0.0, |(_, v)| *v)
    };
    Some(format!(
        "n{id} {method} {route}: {count} answered, mean {:.0} ms, within 0.1 s {}, within 1 s {}, \
         over 1 s {}, over 10 s {}",
        if count > 0.0 {
            1000.0 * sum / count
        } else {
            0.0
        },
        within("0.1"),
        within("1.0"),
        count - within("1.0"),
        count - within("10.0")
    ))
}

/// An HTTP/1 answer read off a raw connection.
#[derive(Debug, Clone)]
pub struct RawAnswer {
    pub status: u16,
    /// Header lines, lower-cased names.
    pub head: String,
    pub body: String,
}

impl RawAnswer {
    pub fn retry_after(&self) -> Option<&str> {
        self.head
            .lines()
            .find_map(|l| l.strip_prefix("retry-after:"))
            .map(str::trim)
    }
}

/// Sends `GET path` on `stream` (keep-alive) and reads one answer with a
/// `content-length` body; `None` when the connection closed or failed
/// first, or nothing complete came within `within`.
pub async fn get_raw(stream: &mut TcpStream, path: &str, within: Duration) -> Option<RawAnswer> {
    let request = format!("GET {path} HTTP/1.1\r\nhost: raftlock\r\n\r\n");
    tokio::time::timeout(within, async {
        stream.write_all(request.as_bytes()).await.ok()?;
        read_answer(stream).await
    })
    .await
    .ok()
    .flatten()
}

/// Reads one HTTP/1 answer (headers and a `content-length` body).
pub async fn read_answer(stream: &mut TcpStream) -> Option<RawAnswer> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let status = head.split_whitespace().nth(1)?.parse().ok()?;
            let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + length]).into_owned();
            return Some(RawAnswer { status, head, body });
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Answers counted by status (and `connect`/`closed` for no answer), with
/// whether every 429 and 503 carried `Retry-After`.
#[derive(Debug, Default)]
pub struct Tally {
    pub by_status: BTreeMap<String, u64>,
    pub refused_without_retry_after: u64,
}

impl Tally {
    pub fn add(&mut self, answer: &Option<RawAnswer>) {
        let key = match answer {
            Some(a) => {
                if matches!(a.status, 429 | 503) && a.retry_after().is_none() {
                    self.refused_without_retry_after += 1;
                }
                // A refusal is counted with its code (`503 overloaded`).
                match serde_json::from_str::<Value>(&a.body)
                    .ok()
                    .and_then(|b| b["error"].as_str().map(str::to_string))
                {
                    Some(code) if a.status >= 400 => format!("{} {code}", a.status),
                    _ => a.status.to_string(),
                }
            }
            None => "closed".to_string(),
        };
        *self.by_status.entry(key).or_default() += 1;
    }

    /// Answers with status `key` (`"503"` counts every 503, whatever its
    /// code), or exactly `key` when it names a code (`"503 overloaded"`).
    pub fn count(&self, key: &str) -> u64 {
        self.by_status
            .iter()
            .filter(|(k, _)| *k == key || k.split(' ').next() == Some(key))
            .map(|(_, v)| v)
            .sum()
    }

    pub fn merge(&mut self, other: &Tally) {
        for (k, v) in &other.by_status {
            *self.by_status.entry(k.clone()).or_default() += v;
        }
        self.refused_without_retry_after += other.refused_without_retry_after;
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .by_status
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        write!(f, "{}", parts.join(", "))
    }
}
