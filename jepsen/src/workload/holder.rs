//! What the lock-like clients ([`super::lock`], [`super::multilock`])
//! share: one session after another, an acquire and what its answer
//! means, and a release that keeps trying while the cluster has no
//! leader. Each client keeps what it asks for and does under the lock.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;

use super::session::{End, Loss, Session};
use super::{backoff, Ctx};
use crate::api::Reply;
use crate::history::{Value, F};
use crate::runlog::Call;

/// How long a holder keeps retrying a release the cluster cannot take
/// (no leader) before giving the session up.
const RELEASE_PATIENCE: Duration = Duration::from_secs(30);

/// Client `idx`'s sessions, one after another until the run stops:
///
/// ```text
/// let mut sessions = Sessions::new(idx);
/// while let Some(session) = sessions.next(&ctx, &mut rng).await {
///     let how = rounds(&session).await; // until it must end
///     sessions.ended(&ctx, session, how);
/// }
/// ```
pub struct Sessions {
    /// The client.
    idx: usize,
    /// The last session and how it must end; ended, and its end recorded,
    /// by the next process (a lost process records nothing itself).
    ending: Option<(Session, End)>,
}

impl Sessions {
    /// Client `idx`'s sessions; none opened yet.
    pub fn new(idx: usize) -> Sessions {
        Sessions { idx, ending: None }
    }

    /// Ends the last session, then opens the next under a fresh process
    /// id; `None` once the run stops.
    pub async fn next(&mut self, ctx: &Arc<Ctx>, rng: &mut StdRng) -> Option<Session> {
        let pid = ctx.next_pid();
        if let Some((old, how)) = self.ending.take() {
            old.end(ctx, pid, how, rng).await;
        }
        if ctx.stopping() {
            return None;
        }
        Session::open(ctx, self.idx, pid, rng).await
    }

    /// `session` must end `how`: the client holds nothing from now on.
    pub fn ended(&mut self, ctx: &Ctx, session: Session, how: End) {
        ctx.set_holding(self.idx, false);
        self.ending = Some((session, how));
    }
}

/// What an acquire came to.
pub enum Acquired<T> {
    /// Granted (the answer's grant) and recorded; the client now holds.
    Held(T),
    /// Not granted (recorded `fail`): try again.
    Retry,
    /// The session must end.
    End(End),
}

/// Sends an acquire, recorded as `call`, to client `idx`'s member:
/// `send(node, wait_ms)`, with a wait drawn from the settings. Records
/// the answer: a grant with the token `token_of` finds in it; `timeout`
/// and `lock_held` as `fail` (other refusals back off first); an unknown
/// outcome as `info`, which gives the session up; `session_not_found` as
/// `info` too (a grant may have raced the expiry).
pub async fn acquire<T, Sent: Future<Output = Reply<T>>>(
    ctx: &Ctx,
    idx: usize,
    session: &Session,
    call: Call,
    rng: &mut StdRng,
    token_of: impl FnOnce(&T) -> Option<u64>,
    send: impl FnOnce(u64, u64) -> Sent,
) -> Acquired<T> {
    let wait_ms = rng.random_range(500..=ctx.settings.max_wait_ms.max(500));
    let route = &ctx.clients[idx].route;
    let node = route.pick(rng);
    ctx.log.invoke(&call);
    let reply = send(node, wait_ms).await;
    route.observe(node, reply.code());
    match reply {
        Reply::Ok(grant) => {
            let token = token_of(&grant);
            ctx.log.ok(&Call { token, ..call }, Value::Nil);
            if let Some(why) = session.lost(ctx) {
                // Granted after the client had given the session up: it
                // never acts on this grant (a loss is final).
                return Acquired::End(End::Lost(why));
            }
            ctx.set_holding(idx, true);
            Acquired::Held(grant)
        }
        Reply::Fail(e) if e.code == "session_not_found" => {
            ctx.log.info(&call, &e.text());
            session.mark_gone(ctx);
            Acquired::End(End::Lost(Loss::Gone))
        }
        Reply::Fail(e) => {
            ctx.log.fail(&call, &e.text());
            if !matches!(e.code.as_str(), "timeout" | "lock_held") {
                backoff(ctx, rng).await;
            }
            Acquired::Retry
        }
        Reply::Info(e) => {
            ctx.log.info(&call, &e.text());
            Acquired::End(End::Lost(Loss::GaveUp))
        }
    }
}

/// Releases what client `idx` holds, `send(node)`, recorded as a
/// `release` of `value`. `None` when released and the session can go on;
/// otherwise how the session must end. A lost session is not released:
/// the client has stopped, and a loss is final.
pub async fn release<Sent: Future<Output = Reply<()>>>(
    ctx: &Ctx,
    idx: usize,
    session: &Session,
    value: Value,
    rng: &mut StdRng,
    mut send: impl FnMut(u64) -> Sent,
) -> Option<End> {
    let route = &ctx.clients[idx].route;
    let started = tokio::time::Instant::now();
    loop {
        if let Some(why) = session.lost(ctx) {
            return Some(End::Lost(why));
        }
        let call = Call {
            pid: session.pid,
            f: F::Release,
            key: ctx.settings.lock.clone(),
            value: value.clone(),
            token: None,
        };
        let node = route.pick(rng);
        ctx.log.invoke(&call);
        let reply = send(node).await;
        route.observe(node, reply.code());
        match reply {
            Reply::Ok(()) => {
                ctx.log.ok(&call, Value::Nil);
                return None;
            }
            Reply::Fail(e) if e.code == "session_not_found" => {
                ctx.log.fail(&call, &e.text());
                session.mark_gone(ctx);
                return Some(End::Lost(Loss::Gone));
            }
            Reply::Fail(e) if matches!(e.code.as_str(), "no_leader" | "connect") => {
                ctx.log.fail(&call, &e.text());
                if started.elapsed() > RELEASE_PATIENCE {
                    return Some(End::Lost(Loss::GaveUp));
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
                return Some(End::Lost(Loss::GaveUp));
            }
            Reply::Info(e) => {
                ctx.log.info(&call, &e.text());
                return Some(End::Lost(Loss::GaveUp));
            }
        }
    }
}
