//! The `mutex` and `fenced` clients.
//!
//! Each client loops: open a session (a new process id), then acquire the
//! lock, hold it briefly (`fenced`: increment the counter in the fenced
//! store under the lock's token), release it, again. History:
//! - `acquire` (key = lock): ok carries the fencing token; `timeout` and
//!   `lock_held` answers are `fail`; an unknown outcome is `info` and
//!   retires the process (its session is closed and the end recorded);
//!   `session_not_found` is `info` too (a grant may have raced the expiry).
//! - `release`: ok, or `fail` while the cluster has no leader (retried,
//!   still holding), or the session is gone (→ `expire`).
//! - `incr` (key = counter, token = the lock's): ok with the counter value
//!   after the increment, `fail` when the store refuses the token.
//! - `expire` / `lost` by the client's next process on behalf of the old
//!   one, see [`super::session`].
//!
//! Client pause (nemesis): while paused the client sends no keepalives;
//! when it holds the lock it stalls at its pause point — during the hold
//! (`mutex`) or between the store read and write of an increment
//! (`fenced`) — and then carries on as if it still held the lock, which
//! is what a real client after a GC pause does.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;

use super::session::{End, Session};
use super::{backoff, Ctx};
use crate::api::Reply;
use crate::history::{Value, F};
use crate::runlog::Call;

/// How long a holder keeps retrying a release the cluster cannot take
/// (no leader) before giving the session up.
const RELEASE_PATIENCE: Duration = Duration::from_secs(30);

/// One lock client; `fenced` adds the counter increment under the lock.
pub async fn client(ctx: Arc<Ctx>, idx: usize, fenced: bool, mut rng: StdRng) {
    let mut ending: Option<(Session, End)> = None;
    loop {
        let pid = ctx.next_pid();
        if let Some((old, how)) = ending.take() {
            old.end(&ctx, pid, how, &mut rng).await;
        }
        if ctx.stopping() {
            return;
        }
        let Some(session) = Session::open(&ctx, idx, pid, &mut rng).await else {
            return;
        };
        let how = session_loop(&ctx, idx, fenced, &session, &mut rng).await;
        ctx.clients[idx].holding.store(false, Ordering::Relaxed);
        ending = Some((session, how));
    }
}

/// Lock rounds on one session until it must end; says how.
async fn session_loop(
    ctx: &Ctx,
    idx: usize,
    fenced: bool,
    session: &Session,
    rng: &mut StdRng,
) -> End {
    let lock = &ctx.settings.lock;
    loop {
        if ctx.stopping() {
            return End::Quiet;
        }
        if session.lost() {
            return End::Gone;
        }
        let call = Call {
            pid: session.pid,
            f: F::Acquire,
            key: lock.clone(),
            value: Value::Nil,
            token: None,
        };
        let wait_ms = rng.random_range(500..=ctx.settings.max_wait_ms.max(500));
        let node = ctx.pick_node(rng);
        let invoked = ctx.log.now();
        ctx.log.invoke(&call);
        let token = match ctx.api.acquire(node, lock, &session.id, wait_ms).await {
            Reply::Ok(token) => {
                session.proved_alive(invoked);
                ctx.log.ok(
                    &Call {
                        token: Some(token),
                        ..call.clone()
                    },
                    Value::Nil,
                );
                token
            }
            Reply::Fail(e) if e.code == "session_not_found" => {
                // A grant may have raced the expiry: unknown.
                ctx.log.info(&call, &e.text());
                session.mark_lost();
                return End::Gone;
            }
            Reply::Fail(e) => {
                ctx.log.fail(&call, &e.text());
                if !matches!(e.code.as_str(), "timeout" | "lock_held") {
                    backoff(ctx, rng).await;
                }
                continue;
            }
            Reply::Info(e) => {
                ctx.log.info(&call, &e.text());
                return End::Close;
            }
        };
        ctx.clients[idx].holding.store(true, Ordering::Relaxed);
        if fenced {
            increment(ctx, idx, session.pid, token).await;
        } else {
            let hold = rng.random_range(0..=ctx.settings.max_hold_ms);
            tokio::time::sleep(Duration::from_millis(hold)).await;
            ctx.clients[idx].wait_unpaused().await;
        }
        let released = release(ctx, session, rng).await;
        ctx.clients[idx].holding.store(false, Ordering::Relaxed);
        if let Some(end) = released {
            return end;
        }
    }
}

/// Read-modify-write of the fenced counter with `token`.
async fn increment(ctx: &Ctx, idx: usize, pid: u64, token: u64) {
    let call = Call {
        pid,
        f: F::Incr,
        key: ctx.settings.counter.clone(),
        value: Value::Nil,
        token: Some(token),
    };
    ctx.log.invoke(&call);
    let read = match ctx.store.read(token) {
        Ok(v) => v,
        Err(stale) => return ctx.log.fail(&call, &stale.to_string()),
    };
    // The pause point: a stall here is the classic lost-update window.
    tokio::task::yield_now().await;
    ctx.clients[idx].wait_unpaused().await;
    match ctx.store.write(read + 1, token) {
        Ok(v) => ctx.log.ok(&call, v),
        Err(stale) => ctx.log.fail(&call, &stale.to_string()),
    }
}

/// Releases the held lock. `None` when released and the session can go
/// on; otherwise how the session must end.
async fn release(ctx: &Ctx, session: &Session, rng: &mut StdRng) -> Option<End> {
    let started = tokio::time::Instant::now();
    loop {
        let call = Call {
            pid: session.pid,
            f: F::Release,
            key: ctx.settings.lock.clone(),
            value: Value::Nil,
            token: None,
        };
        let node = ctx.pick_node(rng);
        let invoked = ctx.log.now();
        ctx.log.invoke(&call);
        match ctx.api.release(node, &ctx.settings.lock, &session.id).await {
            Reply::Ok(()) => {
                session.proved_alive(invoked);
                ctx.log.ok(&call, Value::Nil);
                return None;
            }
            Reply::Fail(e) if e.code == "session_not_found" => {
                ctx.log.fail(&call, &e.text());
                session.mark_lost();
                return Some(End::Gone);
            }
            Reply::Fail(e) if matches!(e.code.as_str(), "no_leader" | "connect") => {
                ctx.log.fail(&call, &e.text());
                if started.elapsed() > RELEASE_PATIENCE {
                    return Some(End::Close);
                }
                // Still holding; try again (the run's stop does not cut
                // this short: the lock must be given back or the session
                // ended on the record).
                tokio::time::sleep(Duration::from_millis(rng.random_range(20..100))).await;
            }
            Reply::Fail(e) => {
                // `not_owner`/`not_found` while we hold it per the server's
                // own grant: recorded as is; the session is given up.
                ctx.log.fail(&call, &e.text());
                return Some(End::Close);
            }
            Reply::Info(e) => {
                ctx.log.info(&call, &e.text());
                return Some(End::Close);
            }
        }
    }
}
