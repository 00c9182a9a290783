//! Memory and snapshot figures for the state machine (not a test).
//!
//! Two loads, each in a fresh state machine:
//! - the server benchmark's shape: 100,000 sessions, each holding one lock
//!   on its own lock name (one-entry queues); prints heap bytes per
//!   session including its lock;
//! - deep queues: 100,000 sessions and 1,000,000 lock nodes (100,000
//!   locks, each with one holder and nine waiters); prints heap bytes per
//!   session and per node, the snapshot size, and encode/restore times;
//! - the etcd key space: 100,000 keys (16-byte keys, 32-byte values, a
//!   third of them leased); prints heap bytes per key with the history
//!   full (its 10,000 newest changes) and after a compaction emptied it,
//!   and per kept change.
//!
//! Run: `cargo bench -p raftlock-core --bench memory`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use raftlock_core::{Command, QueueKind, SessionId, StateMachine};

/// Counts live heap bytes, so the figures are what the state really holds.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const SESSIONS: u128 = 100_000;
const NODES_PER_SESSION: u128 = 10;
const LOCKS: u128 = 100_000;

/// Spreads session ids like random ones would be.
fn session_id(i: u128) -> SessionId {
    SessionId(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
}

fn main() {
    one_lock_per_session();
    deep_queues();
    etcd_keys();
}

/// 100,000 etcd keys, a third of them leased to 1,000 sessions.
fn etcd_keys() {
    use raftlock_core::kv::{KvOp, PutRequest};
    const KEYS: usize = 100_000;
    let mut sm = StateMachine::new();
    for i in 0..1_000 {
        open_session(&mut sm, i);
    }
    let base = LIVE.load(Ordering::Relaxed);
    for i in 0..KEYS {
        let put = Command::Kv(KvOp::Put(PutRequest {
            key: format!("registry/{i:07}").into_bytes(),
            value: vec![b'v'; 32],
            lease: (i % 3 == 0).then(|| session_id((i % 1_000) as u128)),
            ..PutRequest::default()
        }));
        assert!(sm.apply(&put).result.is_ok());
    }
    let full = LIVE.load(Ordering::Relaxed);
    let compact = Command::Kv(KvOp::Compact {
        revision: sm.revision(),
    });
    assert!(sm.apply(&compact).result.is_ok());
    // A copy of the compacted state holds the keys alone: the history's
    // emptied buffer keeps its capacity, the copy's does not.
    let before_copy = LIVE.load(Ordering::Relaxed);
    let copy = sm.clone();
    let keys_alone = LIVE.load(Ordering::Relaxed) - before_copy;
    let compacted = base + keys_alone;
    println!("raftlock-core memory figures ({KEYS} etcd keys: 16-byte keys, 32-byte values, a third leased)");
    println!(
        "  heap per key, history full:   {} bytes ({} changes kept)",
        (full - base) / KEYS,
        raftlock_core::kv::HISTORY_MAX_EVENTS
    );
    println!(
        "  heap per key, no history:     {} bytes",
        (compacted - base) / KEYS
    );
    println!(
        "  heap per kept change:         {} bytes",
        full.saturating_sub(compacted) / raftlock_core::kv::HISTORY_MAX_EVENTS
    );
    drop(copy);
}

fn open_session(sm: &mut StateMachine, i: u128) {
    let open = Command::OpenSession {
        id: session_id(i),
        owner: format!("worker-{i}"),
        ttl_ms: 10_000,
    };
    assert!(sm.apply(&open).result.is_ok());
}

/// Every session holds one lock of its own, as in the server benchmark.
fn one_lock_per_session() {
    let base = LIVE.load(Ordering::Relaxed);
    let mut sm = StateMachine::new();
    for i in 0..SESSIONS {
        open_session(&mut sm, i);
        let acquire = Command::Acquire {
            kind: QueueKind::Lock,
            name: format!("bench/{i}"),
            session: session_id(i),
            data: Vec::new(),
            wait: true,
        };
        assert!(sm.apply(&acquire).result.is_ok());
    }
    let after = LIVE.load(Ordering::Relaxed);
    println!(
        "raftlock-core memory figures ({SESSIONS} sessions, each holding one lock of its own)"
    );
    println!(
        "  heap per session + lock:      {} bytes",
        (after - base) as u128 / SESSIONS
    );
    drop(sm);
}

/// Ten-entry queues: one holder and nine waiters per lock.
fn deep_queues() {
    let base = LIVE.load(Ordering::Relaxed);
    let mut sm = StateMachine::new();
    let start = Instant::now();
    for i in 0..SESSIONS {
        open_session(&mut sm, i);
    }
    let after_sessions = LIVE.load(Ordering::Relaxed);
    for i in 0..SESSIONS {
        for j in 0..NODES_PER_SESSION {
            let acquire = Command::Acquire {
                kind: QueueKind::Lock,
                name: format!("orders/{}", (i * NODES_PER_SESSION + j) % LOCKS),
                session: session_id(i),
                data: Vec::new(),
                wait: true,
            };
            assert!(sm.apply(&acquire).result.is_ok());
        }
    }
    let load_time = start.elapsed();
    let after_nodes = LIVE.load(Ordering::Relaxed);
    let nodes = SESSIONS * NODES_PER_SESSION;

    let start = Instant::now();
    let snapshot = sm.to_snapshot().expect("encode");
    let encode = start.elapsed();
    let start = Instant::now();
    let restored = StateMachine::from_snapshot(&snapshot).expect("decode");
    let restore = start.elapsed();
    assert_eq!(restored.counts(), sm.counts());

    println!(
        "raftlock-core memory figures ({SESSIONS} sessions, {nodes} lock nodes in {LOCKS} locks)"
    );
    println!(
        "  load (apply {} commands): {:.2?}",
        SESSIONS + nodes,
        load_time
    );
    println!(
        "  heap per session (no nodes):  {} bytes",
        (after_sessions - base) as u128 / SESSIONS
    );
    println!(
        "  heap per lock node:           {} bytes (tree node + queue entry + session index)",
        (after_nodes - after_sessions) as u128 / nodes
    );
    println!(
        "  total heap:                   {:.1} MiB",
        (after_nodes - base) as f64 / (1 << 20) as f64
    );
    println!(
        "  snapshot: {:.1} MiB, encode {:.2?}, decode+verify {:.2?}",
        snapshot.len() as f64 / (1 << 20) as f64,
        encode,
        restore
    );
}
