//! Peer pipes behind a TCP proxy on every link (as the Jepsen harness
//! puts them, through `peer_overrides`): a link that stalls or breaks is
//! detected (a call ends within its timeout, the connection is dropped),
//! and once the link heals the next call dials a new pipe; in plain TCP
//! and with mutual TLS. Real nodes, real sockets, real TLS handshakes;
//! the proxies are in this file.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, init_tracing, settings, WAIT};
use raftlock_node::core::Command;
use raftlock_node::{ClientAuth, Consistency, Member, Node, NodeConfig, NodeId, TlsSettings};
use raftlock_tls::generate::Ca;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

/// Longest a call over a cut link may take to fail: the leader wait (3 s
/// by default) a little over twice, and slack for a loaded machine.
const BOUND: Duration = Duration::from_secs(10);

/// What a proxied link does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Up,
    /// Nothing forwarded any more, connections left open: a connection
    /// that saw this never forwards again, even after the link heals.
    Stall,
    /// Connections closed, new ones closed on accept.
    Reset,
}

/// A proxy for one directed link.
struct Proxy {
    addr: SocketAddr,
    state: watch::Sender<Link>,
    /// The first bytes of every connection that forwarded any.
    opened: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Pump tasks running (two per open connection).
    pumps: Arc<AtomicUsize>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let (state, _) = watch::channel(Link::Up);
        let opened = Arc::new(Mutex::new(Vec::new()));
        let pumps = Arc::new(AtomicUsize::new(0));
        let (states, log, running) = (state.clone(), opened.clone(), pumps.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *states.borrow() == Link::Reset {
                    continue; // dropped: closed on accept
                }
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                running.fetch_add(2, Ordering::SeqCst);
                let up = pump(
                    client_read,
                    server_write,
                    states.subscribe(),
                    Some(log.clone()),
                );
                let down = pump(server_read, client_write, states.subscribe(), None);
                for pump in [Box::pin(up), Box::pin(down)] {
                    let running = running.clone();
                    tokio::spawn(async move {
                        pump.await;
                        running.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            }
        });
        Proxy {
            addr,
            state,
            opened,
            pumps,
        }
    }

    fn set(&self, link: Link) {
        self.state.send_replace(link);
    }

    /// Connections open through the proxy (each one's two pumps running).
    fn open_connections(&self) -> usize {
        self.pumps.load(Ordering::SeqCst).div_ceil(2)
    }

    /// Connections whose first bytes `dialed` recognises, so far.
    fn opened(&self, dialed: fn(&[u8]) -> bool) -> usize {
        let opened = self.opened.lock().expect("log");
        opened.iter().filter(|first| dialed(first)).count()
    }
}

/// Copies `from` to `to` while the link is up. Once it stalls this
/// connection hangs (its bytes are gone, the stream is no longer whole)
/// until the link resets; a reset closes it.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut state: watch::Receiver<Link>,
    log: Option<Arc<Mutex<Vec<Vec<u8>>>>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut first = true;
    loop {
        let link = *state.borrow_and_update();
        match link {
            Link::Up => {}
            Link::Reset => return,
            Link::Stall => {
                while *state.borrow_and_update() != Link::Reset {
                    if state.changed().await.is_err() {
                        return;
                    }
                }
                return;
            }
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = state.changed() => continue,
        };
        if *state.borrow() != Link::Up {
            continue; // these bytes are lost
        }
        if first {
            first = false;
            if let Some(log) = &log {
                let prefix = buf[..n.min(32)].to_vec();
                log.lock().expect("log").push(prefix);
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Three members; member i reaches member j through `proxies[(i, j)]`.
struct Cluster {
    nodes: BTreeMap<NodeId, Node>,
    proxies: BTreeMap<(NodeId, NodeId), Proxy>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// With `tls`, the members speak mutual TLS (certificates of a CA
    /// made for the test).
    async fn start(tls: bool) -> Cluster {
        init_tracing();
        let dir = tempfile::tempdir().expect("tempdir");
        let tls = tls.then(|| {
            let ca = Ca::create(dir.path(), "peer-pipe-test").expect("CA");
            let member = ca
                .issue_member(dir.path(), "member", &["127.0.0.1", "localhost"])
                .expect("member certificate");
            TlsSettings {
                ca: ca.cert_path.clone(),
                cert: member.cert,
                key: member.key,
                client_auth: ClientAuth::None,
            }
        });
        let mut listeners = BTreeMap::new();
        let mut members = BTreeMap::new();
        for id in 1..=3u64 {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            members.insert(id, Member::new("127.0.0.1:0", addr.to_string()));
            listeners.insert(id, (listener, addr));
        }
        let mut proxies = BTreeMap::new();
        for from in 1..=3u64 {
            for to in (1..=3u64).filter(|to| *to != from) {
                proxies.insert((from, to), Proxy::start(listeners[&to].1).await);
            }
        }
        let mut starts = Vec::new();
        for (id, (listener, _)) in listeners {
            let peer_overrides = (1..=3u64)
                .filter(|to| *to != id)
                .map(|to| (to, proxies[&(id, to)].addr.to_string()))
                .collect();
            let config = NodeConfig {
                id,
                members: members.clone(),
                data_dir: dir.path().join(format!("node-{id}")),
                settings: settings(),
                peer_overrides,
                tls: tls.clone(),
            };
            starts.push(tokio::spawn(Node::start_with_listener(config, listener)));
        }
        let mut nodes = BTreeMap::new();
        for start in starts {
            let node = start.await.expect("start task").expect("start");
            nodes.insert(node.id(), node);
        }
        Cluster {
            nodes,
            proxies,
            _dir: dir,
        }
    }

    /// The leader all three members agree on.
    async fn leader(&self) -> NodeId {
        let deadline = Instant::now() + WAIT;
        loop {
            let leaders: Vec<_> = self.nodes.values().map(|n| n.status().leader_id).collect();
            if let Some(Some(leader)) = leaders.first() {
                if leaders.iter().all(|l| *l == Some(*leader)) {
                    return *leader;
                }
            }
            assert!(Instant::now() < deadline, "no agreed leader: {leaders:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn shutdown(self) {
        for node in self.nodes.values() {
            node.shutdown().await;
        }
    }
}

/// A write that must not be applied twice: a retry after a lost answer
/// is not allowed, so it succeeds only if its first attempt is answered.
fn put(path: &str) -> Command {
    Command::Put {
        path: path.into(),
        data: b"v".to_vec(),
        session: None,
        sequential: false,
        expected_version: None,
    }
}

/// Whether `node`'s own replica holds `path`.
async fn holds(node: &Node, path: &str) -> bool {
    let path = path.to_string();
    node.read_state(Consistency::Stale, move |sm| sm.node(&path).is_some())
        .await
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_or_broken_link_is_detected_and_redialed_after_it_heals() {
    let cluster = Cluster::start(false).await;
    stall_break_and_heal(cluster, |first| first.starts_with(b"GET /internal/pipe ")).await;
}

/// The same over mutual TLS: the proxies see only TLS records (a
/// connection opens with a handshake record, type 22), and the pipes
/// are dialed, detected dead and dialed again through the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mutual_tls_a_broken_link_is_detected_and_redialed_too() {
    let cluster = Cluster::start(true).await;
    stall_break_and_heal(cluster, |first| first.first() == Some(&22)).await;
}

/// Stalls, breaks and heals the links between the leader and a follower
/// while the follower forwards writes and the leader replicates;
/// `dialed` recognises the first bytes of a new pipe connection.
async fn stall_break_and_heal(cluster: Cluster, dialed: fn(&[u8]) -> bool) {
    let leader = cluster.leader().await;
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let node = &cluster.nodes[&follower];
    let link = &cluster.proxies[&(follower, leader)];

    // Healthy: the follower's write reaches the leader over a pipe.
    node.submit_command(put("/healthy"))
        .await
        .expect("forwarded write");
    assert!(link.opened(dialed) >= 1, "the forward went over a pipe");

    // Stalled: the pooled pipe's call times out instead of hanging, and
    // so does every new one (the proxy accepts, then forwards nothing).
    link.set(Link::Stall);
    let started = Instant::now();
    let stalled = node.submit_command(put("/stalled")).await;
    assert!(
        stalled.is_err(),
        "a write through a stalled link: {stalled:?}"
    );
    assert!(
        started.elapsed() < BOUND,
        "took {:?} to fail",
        started.elapsed()
    );

    // Healed: the stalled connections never forward again, so this write
    // succeeds only on a newly dialed pipe.
    let before = link.opened(dialed);
    link.set(Link::Up);
    node.submit_command(put("/after-stall"))
        .await
        .expect("a write after the link healed");
    assert!(link.opened(dialed) > before, "a new pipe was dialed");

    // Broken: the proxy closes every connection, including the idle
    // pooled pipe; the follower learns it when it next uses the pool.
    link.set(Link::Reset);
    let started = Instant::now();
    let broken = node.submit_command(put("/broken")).await;
    assert!(broken.is_err(), "a write through a broken link: {broken:?}");
    assert!(started.elapsed() < BOUND);

    // Healed after a reset that closed the idle pipes: a write that may
    // not be retried after a lost answer succeeds at once, because a pipe
    // found closed in the pool is dropped before anything is written.
    let before = link.opened(dialed);
    link.set(Link::Up);
    let pooled_then_closed = node.submit_command(put("/warm")).await;
    pooled_then_closed.expect("write after heal");
    link.set(Link::Reset);
    eventually("the proxy to close every connection", WAIT, || {
        link.open_connections() == 0
    })
    .await;
    link.set(Link::Up);
    node.submit_command(put("/after-reset"))
        .await
        .expect("a write on a new pipe, not the closed pooled one");
    assert!(link.opened(dialed) > before + 1);

    // The leader's side: appends to a follower over a stalled link time
    // out (openraft's RPC timeout), and once it heals the follower
    // catches up over a new pipe.
    let append_link = &cluster.proxies[&(leader, follower)];
    append_link.set(Link::Stall);
    cluster.nodes[&leader]
        .submit_command(put("/while-stalled"))
        .await
        .expect("the leader and the other follower commit");
    assert!(!holds(node, "/while-stalled").await, "nothing got through");
    append_link.set(Link::Up);
    let deadline = Instant::now() + WAIT;
    while !holds(node, "/while-stalled").await {
        assert!(Instant::now() < deadline, "the follower never caught up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.shutdown().await;
}
