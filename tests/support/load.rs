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

/// What one member used during a phase.
#[derive(Debug, Clone)]
pub struct Usage {
    pub id: u64,
    /// Highest RSS sampled during the phase (KiB).
    pub peak_rss_kib: u64,
    /// RSS at the start of the phase (KiB).
    pub start_rss_kib: u64,
    /// CPU seconds used during the phase.
    pub cpu_secs: f64,
    /// The process still ran at the end.
    pub alive: bool,
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n{}: RSS {:.1} -> peak {:.1} MiB, CPU {:.1} s{}",
            self.id,
            self.start_rss_kib as f64 / 1024.0,
            self.peak_rss_kib as f64 / 1024.0,
            self.cpu_secs,
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
    start: BTreeMap<u64, (u64, f64)>,
    started: Instant,
}

impl Sampler {
    /// Starts sampling members `ids` of `cluster`.
    pub fn start(cluster: &ProcessCluster, ids: &[u64]) -> Sampler {
        let pids: Vec<(u64, u32)> = ids
            .iter()
            .map(|&id| (id, cluster.pid(id).expect("member runs")))
            .collect();
        let start = pids
            .iter()
            .map(|&(id, pid)| {
                (
                    id,
                    (rss_kib(pid).unwrap_or(0), cpu_secs(pid).unwrap_or(0.0)),
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
        }
    }

    /// Stops sampling; what each member used since [`Sampler::start`].
    pub fn finish(self) -> (Vec<Usage>, Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let peak = self.thread.join().expect("sampler thread");
        let usage = self
            .pids
            .iter()
            .map(|&(id, pid)| {
                let (start_rss, start_cpu) = self.start[&id];
                let alive = process_alive(pid);
                Usage {
                    id,
                    peak_rss_kib: peak.get(&id).copied().unwrap_or(0).max(start_rss),
                    start_rss_kib: start_rss,
                    cpu_secs: cpu_secs(pid).map_or(0.0, |c| c - start_cpu),
                    alive,
                }
            })
            .collect();
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
/// does), with a record of how its keepalives fared.
pub struct Holder {
    pub session: String,
    pub lock: String,
    pub token: u64,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    record: Arc<Mutex<KeepaliveRecord>>,
    ok: Arc<AtomicU64>,
}

/// How a holder's keepalives went.
#[derive(Debug, Default, Clone)]
pub struct KeepaliveRecord {
    /// Longest time between two successful keepalives (send times), ms.
    pub max_gap_ms: u64,
    /// Answers that were not 200, by member and status.
    pub refused: Vec<String>,
    /// The session was reported gone.
    pub lost: bool,
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
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(ttl_ms / 3))
            .build()
            .expect("http client");
        let stop = Arc::new(AtomicBool::new(false));
        let record = Arc::new(Mutex::new(KeepaliveRecord::default()));
        let ok = Arc::new(AtomicU64::new(0));
        let task = {
            let (stop, record, ok) = (Arc::clone(&stop), Arc::clone(&record), Arc::clone(&ok));
            tokio::spawn(async move {
                let mut last_ok = Instant::now();
                let period = Duration::from_millis(ttl_ms / 3);
                let mut next = tokio::time::Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    next += period;
                    let sent = Instant::now();
                    let mut done = false;
                    for (member, url) in &urls {
                        match http.post(url).send().await {
                            Ok(r) if r.status().as_u16() == 200 => {
                                done = true;
                                break;
                            }
                            Ok(r) => {
                                let status = r.status().as_u16();
                                let body = r.text().await.unwrap_or_default();
                                let mut rec = record.lock().expect("record");
                                if status == 404 {
                                    rec.lost = true;
                                }
                                rec.refused.push(format!("n{member}: {status} {body}"));
                            }
                            Err(e) => record
                                .lock()
                                .expect("record")
                                .refused
                                .push(format!("n{member}: {e}")),
                        }
                    }
                    if done {
                        let gap = sent.duration_since(last_ok).as_millis() as u64;
                        let mut rec = record.lock().expect("record");
                        rec.max_gap_ms = rec.max_gap_ms.max(gap);
                        last_ok = sent;
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    // The keepalive schedule of a client (TTL/3), not a wait
                    // for some event.
                    tokio::time::sleep_until(next.max(tokio::time::Instant::now())).await;
                }
            })
        };
        Holder {
            session,
            lock: lock.to_string(),
            token,
            stop,
            task,
            record,
            ok,
        }
    }

    /// Stops the keepalives; checks through `ask` that the lock is still
    /// this session's, with its token. Returns the record.
    pub async fn finish(self, cluster: &ProcessCluster, ask: u64) -> (KeepaliveRecord, Value) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
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
            "no keepalive of the holder succeeded: {record:?}"
        );
        (record, lock)
    }
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
