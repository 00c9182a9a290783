//! The `mutex`, `fenced`, `rwlock`, `semaphore` and `lock-delay` clients.
//!
//! `lock-delay` is `mutex` with a lock-delay on every acquire; its
//! clients' lost sessions (kills, partitions, client pauses) hold the lock
//! off, and [`crate::checker::lock_delay`] checks nobody got it sooner.
//!
//! `rwlock` is `mutex` on `/v1/rwlocks`: each acquire picks a mode (a
//! third are writes), recorded as the acquire's value (`"read"` /
//! `"write"`) for [`crate::checker::rwlock`]. `semaphore` is `mutex` on
//! `/v1/semaphores`, the limit N recorded as the acquire's value for
//! [`crate::checker::semaphore`].
//!
//! Each client loops: open a session (a new process id), then acquire the
//! lock, hold it briefly (`fenced`: increment the counter in the fenced
//! store under the lock's token), release it, again. Every request goes
//! to the client's member ([`super::route`]). History:
//! - `acquire` (key = lock): ok carries the fencing token; `timeout` and
//!   `lock_held` answers are `fail`; an unknown outcome is `info` and
//!   retires the process (its session is given up and the end recorded);
//!   `session_not_found` is `info` too (a grant may have raced the expiry).
//! - `release`: ok, or `fail` while the cluster has no leader (retried,
//!   still holding, until the session is lost), or the session is gone
//!   (→ `expire`).
//! - `incr` (key = counter, token = the lock's): ok with the counter value
//!   after the increment, `fail` when the store refuses the token.
//! - `expire` / `lost` by the client's next process on behalf of the old
//!   one, at the instant the client observed the loss; see
//!   [`super::session`].
//!
//! A holder stops at once when its session is lost (the deadline after
//! its last successful keepalive passed, or the cluster said it is gone),
//! as an application selecting on `Session::lost()` does, and never
//! releases a lost session's lock (a loss is final).
//!
//! Long hold (the `isolate-leader` nemesis): while asked, a holder keeps
//! the lock, keepalives going on, until let go or until its session is
//! lost: a long critical section on a member that may be cut off.
//!
//! Client pause (nemesis): while paused the client sends no keepalives;
//! when it holds the lock it stalls at its pause point — during the hold
//! (`mutex`) or between the store read and write of an increment
//! (`fenced`) — and then carries on as if it still held the lock, which
//! is what a real client after a GC pause does (its loss is still
//! recorded at its deadline: fencing must stop the late write).

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;

use super::holder::{self, Acquired, Sessions};
use super::session::{End, Session};
use super::Ctx;
use crate::history::{Value, F};
use crate::runlog::Call;

/// Which lock a client takes, and what it does under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A mutex, held briefly.
    Mutex,
    /// A mutex, with the counter increment under it.
    Fenced,
    /// A read-write lock in a random mode, held briefly.
    RwLock,
    /// A semaphore of `Settings::permits`, held briefly.
    Semaphore,
    /// A mutex with `Settings::lock_delay_ms` (docs/api.md, "Lock-delay"),
    /// held briefly; the delay is recorded as the acquire's value
    /// (`{"lock_delay_ms": D}`) for [`crate::checker::lock_delay`].
    Delayed,
}

/// The name a client's semaphore requests go to: the shared one, or with
/// the injected bug a second one for odd clients.
fn sem_name(ctx: &Ctx, idx: usize) -> String {
    if ctx.settings.inject_sem_wrong_name && idx % 2 == 1 {
        format!("{}-2", ctx.settings.lock)
    } else {
        ctx.settings.lock.clone()
    }
}

/// One lock client of `kind`.
pub async fn client(ctx: Arc<Ctx>, idx: usize, kind: Kind, mut rng: StdRng) {
    let mut sessions = Sessions::new(idx);
    while let Some(session) = sessions.next(&ctx, &mut rng).await {
        let how = session_loop(&ctx, idx, kind, &session, &mut rng).await;
        sessions.ended(&ctx, session, how);
    }
}

/// Lock rounds on one session until it must end; says how.
async fn session_loop(
    ctx: &Ctx,
    idx: usize,
    kind: Kind,
    session: &Session,
    rng: &mut StdRng,
) -> End {
    let fenced = kind == Kind::Fenced;
    let lock = &ctx.settings.lock;
    loop {
        if let Some(why) = session.lost(ctx) {
            return End::Lost(why);
        }
        if ctx.stopping() {
            return End::Quiet;
        }
        let mode = (kind == Kind::RwLock).then(|| {
            if rng.random_range(0..3) == 0 {
                "write"
            } else {
                "read"
            }
        });
        let call = Call {
            pid: session.pid,
            f: F::Acquire,
            key: lock.clone(),
            value: match (kind, mode) {
                (_, Some(m)) => Value::Str(m.into()),
                (Kind::Semaphore, None) => {
                    Value::Int(i64::try_from(ctx.settings.permits).unwrap_or(i64::MAX))
                }
                (Kind::Delayed, None) => Value::Map(
                    [(
                        "lock_delay_ms".to_string(),
                        Value::Int(i64::try_from(ctx.settings.lock_delay_ms).unwrap_or(i64::MAX)),
                    )]
                    .into(),
                ),
                _ => Value::Nil,
            },
            token: None,
        };
        let send = |node, wait_ms| async move {
            match mode {
                None if kind == Kind::Semaphore => {
                    let name = sem_name(ctx, idx);
                    let ask = (ctx.settings.permits, wait_ms);
                    ctx.client_api
                        .sem_acquire(node, &name, &session.id, ask)
                        .await
                }
                None if kind == Kind::Delayed => {
                    // The injected bug: the delay recorded is not asked for.
                    let delay = if ctx.settings.inject_no_lock_delay {
                        0
                    } else {
                        ctx.settings.lock_delay_ms
                    };
                    let ask = (wait_ms, delay);
                    ctx.client_api
                        .acquire_delayed(node, lock, &session.id, ask)
                        .await
                }
                None => {
                    ctx.client_api
                        .acquire(node, lock, &session.id, wait_ms)
                        .await
                }
                Some(mode) => {
                    // The injected bug: a write hold taken in read mode.
                    let sent = if ctx.settings.inject_rw_read_for_write {
                        "read"
                    } else {
                        mode
                    };
                    ctx.client_api
                        .rw_acquire(node, lock, &session.id, (sent, wait_ms))
                        .await
                }
            }
        };
        let token = match holder::acquire(ctx, idx, session, call, rng, |t| Some(*t), send).await {
            Acquired::Held(token) => token,
            Acquired::Retry => continue,
            Acquired::End(end) => return end,
        };
        if fenced {
            increment(ctx, idx, session.pid, token).await;
        }
        hold(ctx, idx, fenced, session, rng).await;
        let released = release(ctx, idx, kind, session, rng).await;
        ctx.set_holding(idx, false);
        if let Some(end) = released {
            return end;
        }
    }
}

/// The critical section: a short random hold (`mutex`), as long as the
/// nemesis asks for a long one, and a stall while the client is paused.
/// Ends early when the session is lost, except during a pause (a paused
/// process cannot react: that is what fencing is for).
async fn hold(ctx: &Ctx, idx: usize, fenced: bool, session: &Session, rng: &mut StdRng) {
    let client = &ctx.clients[idx];
    let short = if fenced {
        Duration::ZERO
    } else {
        Duration::from_millis(rng.random_range(0..=ctx.settings.max_hold_ms))
    };
    tokio::select! {
        _ = async {
            tokio::time::sleep(short).await;
            client.wait_no_long_hold().await;
        } => {}
        _ = session.wait_lost() => {}
    }
    if !fenced {
        client.wait_unpaused().await;
    }
}

/// Read-modify-write of the fenced counter with `token` (also the
/// `zk-mutex` clients').
pub(super) async fn increment(ctx: &Ctx, idx: usize, pid: u64, token: u64) {
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

/// Releases the held lock, as [`holder::release`].
async fn release(
    ctx: &Ctx,
    idx: usize,
    kind: Kind,
    session: &Session,
    rng: &mut StdRng,
) -> Option<End> {
    let lock = &ctx.settings.lock;
    holder::release(ctx, idx, session, Value::Nil, rng, |node| async move {
        let api = &ctx.client_api;
        match kind {
            Kind::Semaphore => {
                api.sem_release(node, &sem_name(ctx, idx), &session.id)
                    .await
            }
            Kind::RwLock => api.rw_release(node, lock, &session.id).await,
            _ => api.release(node, lock, &session.id).await,
        }
    })
    .await
}
