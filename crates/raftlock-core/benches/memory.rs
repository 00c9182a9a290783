//! Memory and snapshot figures for the state machine (not a test).
//!
//! Two loads, each in a fresh state machine:
//! - the server benchmark's shape: 100,000 sessions, each holding one lock
//!   on its own lock name (one-entry queues); prints heap bytes per
//!   session including its lock;
//! - deep queues: 100,000 sessions and 1,000,000 lock nodes (100,000
//!   locks, each with one holder and nine waiters); prints heap bytes per
//!   session and per node, the snapshot size, and encode/restore times.
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
