//! A member whose runtime falls behind takes fewer connections
//! (crates/raftlock-server/src/overload/shedding.rs): new ones get `503
//! overloaded`, open ones are closed after their next answer, and a lock
//! holder's keepalive is still served and its connection kept.
//!
//! The runtime is made to fall behind for real: a thread blocks both of
//! the test runtime's workers for 150 ms of every 250 ms, so every task
//! of the three in-process members, the measuring one included, wakes
//! late.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use raftlock_server::ApiConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{eventually, TestCluster, WAIT};

/// Worker threads of the test runtime (the attribute below).
const WORKERS: usize = 2;

/// Blocks every worker of the runtime for `stall` out of every
/// `stall + gap`, from a thread of its own, until dropped.
struct Staller {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Staller {
    fn start(runtime: tokio::runtime::Handle, stall: Duration, gap: Duration) -> Staller {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                // Every worker takes one blocking task; the barrier makes
                // sure they all block at once.
                let all = Arc::new(Barrier::new(WORKERS + 1));
                for _ in 0..WORKERS {
                    let all = all.clone();
                    runtime.spawn(async move {
                        all.wait();
                        std::thread::sleep(stall);
                    });
                }
                all.wait();
                // The fault's schedule: the runtime runs for `gap`.
                std::thread::sleep(stall + gap);
            }
        });
        Staller {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Staller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// An answer read off a kept connection.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn closes(&self) -> bool {
        self.head
            .lines()
            .any(|l| l.eq_ignore_ascii_case("connection: close"))
    }
}

/// Sends `request` on `stream` and reads one whole answer (head and a
/// `content-length` body).
async fn exchange(stream: &mut TcpStream, request: &str) -> Answer {
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = async {
        loop {
            if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&bytes[..end]).to_string();
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if bytes.len() >= end + 4 + length {
                    let body = String::from_utf8_lossy(&bytes[end + 4..end + 4 + length]);
                    return (head, body.to_string());
                }
            }
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "closed before a whole answer");
            bytes.extend_from_slice(&chunk[..n]);
        }
    };
    let (head, body) = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("an answer in time");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    Answer { status, head, body }
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: raftlock\r\n\r\n")
}

fn keepalive(session: &str) -> String {
    format!(
        "POST /v1/sessions/{session}/keepalive HTTP/1.1\r\nhost: raftlock\r\ncontent-length: 0\r\n\r\n"
    )
}

async fn connect(c: &TestCluster, i: usize) -> TcpStream {
    TcpStream::connect(c.urls[i].trim_start_matches("http://"))
        .await
        .expect("connect")
}

/// `name`'s value in an OpenMetrics text.
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_behind_its_load_sheds_connections_but_keeps_a_holders() {
    let c = TestCluster::start_with(ApiConfig {
        max_connections: 128,
        ..ApiConfig::default()
    })
    .await;
    let l = c.leader().await;
    let (holder, idle) = c.holder_and_idle(l).await;
    let (holder, idle) = (holder.to_string(), idle.to_string());

    // 100 kept connections: within the cap, over the floor (64).
    let mut kept = Vec::new();
    for _ in 0..100 {
        let mut stream = connect(&c, l).await;
        let a = exchange(&mut stream, &get("/v1/no-such-route")).await;
        assert_eq!(a.status, 404, "served within the cap: {}", a.head);
        kept.push(stream);
    }
    let mut holders_connection = connect(&c, l).await;
    let a = exchange(&mut holders_connection, &keepalive(&holder)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    // Nothing is cut while the member keeps up (on a loaded machine it may
    // fall behind for a moment; then the limit grows back).
    eventually("the limit at the cap while the member keeps up", || async {
        let mut stream = connect(&c, l).await;
        let a = exchange(&mut stream, &get("/metrics")).await;
        metric(&a.body, "raftlock_api_connection_limit") == Some(128)
    })
    .await;
    let mut metrics = kept.pop().expect("a kept connection");

    let staller = Staller::start(
        tokio::runtime::Handle::current(),
        Duration::from_millis(150),
        Duration::from_millis(100),
    );
    // Asked again and again on one connection until the member sheds:
    // then this answer closes it.
    let deadline = tokio::time::Instant::now() + WAIT;
    let a = loop {
        let a = exchange(&mut metrics, &get("/metrics")).await;
        if a.closes() {
            break a;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the member never shed a connection: {}",
            a.body
        );
    };
    // The body is rendered before the answer's close is decided, so on a
    // loaded machine it may show the limit of just before the cut; the
    // cut itself is what the refused connection below shows.
    let limit = metric(&a.body, "raftlock_api_connection_limit").expect("limit");
    let open = metric(&a.body, "raftlock_api_connections").expect("open");
    assert!((64..=128).contains(&limit), "limit {limit}, open {open}");

    // A new connection is refused, although the cap (128) is not reached.
    let mut fresh = connect(&c, l).await;
    let a = exchange(&mut fresh, &get("/v1/no-such-route")).await;
    assert_eq!(a.status, 503, "a new connection while shedding: {}", a.head);
    assert!(a.body.contains("overloaded"), "{}", a.body);
    assert!(
        a.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{}",
        a.head
    );

    // The holder's keepalive is served, its connection kept; an idle
    // session's is served and its connection closed.
    let a = exchange(&mut holders_connection, &keepalive(&holder)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(
        !a.closes(),
        "the holder's connection was closed: {}",
        a.head
    );
    let mut idles = kept.pop().expect("a kept connection");
    let a = exchange(&mut idles, &keepalive(&idle)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.closes(), "an idle session's connection kept: {}", a.head);
    // So is a holder's keepalive on a new connection.
    let mut fresh = connect(&c, l).await;
    let a = exchange(&mut fresh, &keepalive(&holder)).await;
    assert_eq!(a.status, 200, "the holder on a new connection: {}", a.body);

    // Caught up again: new connections are served.
    drop(staller);
    eventually("new connections are served again", || async {
        let mut stream = connect(&c, l).await;
        exchange(&mut stream, &get("/v1/no-such-route"))
            .await
            .status
            == 404
    })
    .await;
    drop(kept);
    c.shutdown().await;
}
