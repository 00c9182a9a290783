//! The durability worker: one thread that runs [`Barrier::sync`] for every
//! queued waiter, sharing one barrier among all waiters queued meanwhile
//! (group commit).
//!
//! Why a dedicated thread:
//! * openraft's `append` must return once entries are *readable* and report
//!   durability later through its callback; running the barrier elsewhere
//!   lets the Raft core replicate to followers while the local disk syncs.
//! * A barrier blocks for a disk round-trip; a plain OS thread keeps that
//!   off the tokio workers without the per-call cost of `spawn_blocking`.
//! * Appends, votes and metadata writes all enqueue here in order, and a
//!   barrier covers every write made before it was started, so durability
//!   is acknowledged in write order, as openraft requires.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::barrier::Barrier;
use crate::error::StoreError;

/// Outcome handed to every waiter of one barrier. Shared (`Arc`) because one
/// failure is reported to many waiters.
pub(crate) type SyncResult = Result<(), Arc<StoreError>>;

/// Called on the worker thread once the writes that preceded its submission
/// are durable (or cannot be made so). Must be quick: it delays the next
/// barrier.
pub(crate) type Waiter = Box<dyn FnOnce(SyncResult) + Send>;

/// Counters of the durability worker, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Barriers executed (each is one sled flush and, with
    /// [`Durability::Fsync`](crate::Durability::Fsync), one `fdatasync`).
    pub barriers: u64,
    /// Durability requests served (appends, votes, truncates, purges,
    /// metadata writes). `requests / barriers` is the group-commit factor.
    pub requests: u64,
    /// Time spent in barriers, in microseconds: `barrier_micros /
    /// barriers` is the mean fsync latency.
    pub barrier_micros: u64,
}

/// A live view of a store's [`SyncStats`], kept after the store itself
/// is handed to Raft.
#[derive(Clone)]
pub struct SyncMeter(Arc<Counters>);

impl SyncMeter {
    /// The counters now.
    pub fn stats(&self) -> SyncStats {
        self.0.stats()
    }
}

/// Fault injection at the durability barrier: while set, the worker holds
/// its next barrier, as if the disk hung ([`SyncStall::set`]); or the next
/// barrier fails as if `fdatasync` returned `EIO` (`SyncStall::fail_next`)
/// or `ENOSPC` (`SyncStall::fail_next_out_of_space`); or every barrier
/// is slowed down, as on a disk whose `fdatasync` takes long
/// (`SyncStall::set_delay`).
/// For tests and fault-injection harnesses; a production node never sets it.
#[derive(Clone, Default)]
pub struct SyncStall {
    stalled: Arc<(Mutex<bool>, Condvar)>,
    /// The `errno` the next barrier fails with; 0: none pending.
    fail_next: Arc<AtomicI32>,
    /// Extra time every barrier takes, in microseconds; 0: none.
    delay_us: Arc<AtomicU64>,
}

impl SyncStall {
    /// Stalls (`true`) or resumes (`false`) the durability barriers.
    pub fn set(&self, stalled: bool) {
        let (flag, changed) = &*self.stalled;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = stalled;
        changed.notify_all();
    }

    #[cfg(any(test, feature = "fault-injection"))]
    /// Makes the next barrier fail with an I/O error (`EIO`) instead of
    /// running, exactly where a failed `fdatasync` is reported. Like a real
    /// failure it is sticky: every later barrier fails too.
    pub fn fail_next(&self) {
        self.fail_next.store(EIO, Ordering::SeqCst);
    }

    #[cfg(any(test, feature = "fault-injection"))]
    /// Makes the next barrier fail with `ENOSPC`, as a full file system
    /// reports it to a write or an `fdatasync`; sticky like any failure.
    pub fn fail_next_out_of_space(&self) {
        self.fail_next.store(ENOSPC, Ordering::SeqCst);
    }

    #[cfg(any(test, feature = "fault-injection"))]
    /// Makes every barrier take `delay` longer (zero: back to normal), as
    /// on a disk whose `fdatasync` is slow. Barriers still succeed; only
    /// durability (hence every commit that waits for this member) is late.
    pub fn set_delay(&self, delay: std::time::Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.delay_us.store(us, Ordering::SeqCst);
    }

    /// The injected failure, if one is pending (taken once).
    fn injected_failure(&self) -> Option<StoreError> {
        match self.fail_next.swap(0, Ordering::SeqCst) {
            0 => None,
            errno => Some(StoreError::Io(std::io::Error::from_raw_os_error(errno))),
        }
    }

    /// Blocks while stalled, then for the injected delay, if any.
    fn pass(&self) {
        let (flag, changed) = &*self.stalled;
        let mut stalled = flag.lock().unwrap_or_else(|e| e.into_inner());
        while *stalled {
            stalled = changed.wait(stalled).unwrap_or_else(|e| e.into_inner());
        }
        drop(stalled);
        let us = self.delay_us.load(Ordering::SeqCst);
        if us > 0 {
            // On the sync thread, where a real slow fsync would block too.
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
    }
}

/// `EIO`, what Linux's `fdatasync` returns when write-back failed (the
/// same number on every Linux architecture).
#[cfg(any(test, feature = "fault-injection"))]
const EIO: i32 = 5;
/// `ENOSPC`: no space left on the device.
#[cfg(any(test, feature = "fault-injection"))]
const ENOSPC: i32 = 28;

#[derive(Default)]
struct Counters {
    barriers: AtomicU64,
    requests: AtomicU64,
    barrier_micros: AtomicU64,
}

impl Counters {
    fn stats(&self) -> SyncStats {
        SyncStats {
            barriers: self.barriers.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            barrier_micros: self.barrier_micros.load(Ordering::Relaxed),
        }
    }
}

/// Handle to the worker thread. Dropping it lets the thread finish the
/// queued requests and joins it, so the database is closed when the last
/// handle is gone.
pub(crate) struct SyncWorker {
    tx: Option<mpsc::Sender<Waiter>>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
    stall: SyncStall,
}

impl SyncWorker {
    /// Starts the worker thread, which owns `barrier`.
    pub(crate) fn spawn(barrier: Barrier) -> Result<Self, StoreError> {
        let (tx, rx) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let stall = SyncStall::default();
        let thread = std::thread::Builder::new()
            .name("raftlock-sync".into()) // <= 15 bytes: Linux truncates thread names
            .spawn({
                let counters = Arc::clone(&counters);
                let stall = stall.clone();
                move || run(barrier, &rx, &counters, &stall)
            })?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
            counters,
            stall,
        })
    }

    /// Queues `waiter` to be called after a barrier that started after this
    /// call. Fails only if the worker thread died.
    pub(crate) fn submit(&self, waiter: Waiter) -> Result<(), StoreError> {
        let tx = self.tx.as_ref().ok_or(StoreError::SyncWorkerGone)?;
        tx.send(waiter).map_err(|_| StoreError::SyncWorkerGone)
    }

    /// Waits (asynchronously) until every write made before this call is
    /// durable.
    pub(crate) async fn sync(&self) -> Result<(), StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(Box::new(move |res| {
            // The receiver may have been dropped (caller cancelled): fine.
            let _ = tx.send(res);
        }))?;
        rx.await
            .map_err(|_| StoreError::SyncWorkerGone)?
            .map_err(StoreError::Barrier)
    }

    /// The handle that stalls this worker's barriers (fault injection).
    pub(crate) fn stall(&self) -> SyncStall {
        self.stall.clone()
    }

    /// Current counters.
    pub(crate) fn stats(&self) -> SyncStats {
        self.counters.stats()
    }

    /// A live handle on the counters.
    pub(crate) fn meter(&self) -> SyncMeter {
        SyncMeter(Arc::clone(&self.counters))
    }
}

impl Drop for SyncWorker {
    fn drop(&mut self) {
        // Closing the channel ends the loop after the queued waiters; a
        // stall left on would keep the thread (and the database) forever.
        self.stall.set(false);
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("raftlock-sync thread panicked");
            }
        }
    }
}

fn run(mut barrier: Barrier, rx: &mpsc::Receiver<Waiter>, counters: &Counters, stall: &SyncStall) {
    // After one failed barrier every later one fails too: once fsync has
    // reported an error, Linux may have dropped the dirty pages, and a later
    // "successful" fsync would acknowledge data that is gone.
    let mut failed: Option<Arc<StoreError>> = None;
    while let Ok(first) = rx.recv() {
        stall.pass();
        // Everything queued so far shares this barrier: each waiter's writes
        // happened before it was queued, hence before the barrier starts.
        let mut waiters = vec![first];
        waiters.extend(rx.try_iter());

        let result = match &failed {
            Some(err) => Err(Arc::clone(err)),
            None => match stall.injected_failure() {
                Some(injected) => Err(injected),
                None => {
                    let started = std::time::Instant::now();
                    let synced = barrier.sync();
                    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    counters.barrier_micros.fetch_add(micros, Ordering::Relaxed);
                    synced
                }
            }
            .map_err(|err| {
                tracing::error!(error = %err, "log durability barrier failed; every later durability request will fail");
                let err = Arc::new(err);
                failed = Some(Arc::clone(&err));
                err
            }),
        };
        counters.barriers.fetch_add(1, Ordering::Relaxed);
        counters
            .requests
            .fetch_add(waiters.len() as u64, Ordering::Relaxed);
        for waiter in waiters {
            waiter(result.clone());
        }
    }
    // Every handle is gone: the store is closing. A last mark lets the next
    // open tell damage to the final records from a torn tail.
    if failed.is_none() {
        if let Err(e) = barrier.close() {
            tracing::warn!(error = %e, "could not write the log's closing mark");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::config::Durability;

    fn worker(dir: &tempfile::TempDir) -> SyncWorker {
        let db = sled::open(dir.path()).expect("open sled");
        let barrier = Barrier::open(db, dir.path(), Durability::FlushOnly, Default::default())
            .expect("barrier");
        SyncWorker::spawn(barrier).expect("spawn")
    }

    /// Requests queued while a barrier runs share the next one.
    #[test]
    fn queued_requests_share_one_barrier() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let worker = worker(&dir);
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel::<SyncResult>();

        // The first waiter holds the worker thread (after its barrier) until
        // released, so the next ten queue up behind it deterministically.
        worker
            .submit(Box::new(move |res| {
                assert!(res.is_ok());
                started_tx.send(()).expect("started");
                release_rx.recv().expect("release");
            }))
            .expect("submit");
        started_rx.recv().expect("first barrier ran");
        for _ in 0..10 {
            let done_tx = done_tx.clone();
            worker
                .submit(Box::new(move |res| done_tx.send(res).expect("report")))
                .expect("submit");
        }
        release_tx.send(()).expect("release");
        for _ in 0..10 {
            done_rx.recv().expect("done").expect("barrier ok");
        }
        let stats = worker.stats();
        assert_eq!((stats.barriers, stats.requests), (2, 11));
        // Not `barrier_micros > 0`: a flush-only barrier of a near-empty
        // store can take under a microsecond (seen in CI). That the time
        // is counted is checked with a real fdatasync in
        // `tests/store.rs::one_barrier_per_append_whatever_the_batch_size`.
        assert_eq!(worker.meter().stats(), stats);
    }

    #[test]
    fn drop_serves_queued_requests_then_joins() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let worker = worker(&dir);
        let (done_tx, done_rx) = mpsc::channel::<SyncResult>();
        for _ in 0..3 {
            let done_tx = done_tx.clone();
            worker
                .submit(Box::new(move |res| done_tx.send(res).expect("report")))
                .expect("submit");
        }
        drop(worker);
        drop(done_tx);
        assert_eq!(done_rx.iter().filter(Result::is_ok).count(), 3);
    }

    /// A delay set with `set_delay` makes each barrier at least that slow,
    /// and clearing it makes them quick again.
    #[test]
    fn an_injected_delay_slows_every_barrier() {
        use std::time::{Duration, Instant};
        let dir = tempfile::TempDir::new().expect("temp dir");
        let worker = worker(&dir);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        worker.stall().set_delay(Duration::from_millis(150));
        let started = Instant::now();
        rt.block_on(worker.sync()).expect("slow barrier ok");
        rt.block_on(worker.sync()).expect("slow barrier ok");
        assert!(started.elapsed() >= Duration::from_millis(300));
        worker.stall().set_delay(Duration::ZERO);
        let started = Instant::now();
        rt.block_on(worker.sync()).expect("barrier ok");
        assert!(started.elapsed() < Duration::from_millis(150));
    }
}
