//! The `multilock` client: transfers between accounts under multi-locks
//! (docs/api.md, "Multi-locks"), checked by [`crate::checker::multilock`].
//!
//! Accounts are nodes (`jepsen/accounts/{i}`, the balance as decimal
//! text), created once with [`Settings::initial_balance`] each
//! (compare-and-set on "absent", so clients racing to create agree). Each
//! account has a lock (`jepsen/acct/{i}`). A client loops on a session:
//! - four times in five, a **transfer**: a multi-lock over two accounts
//!   (named in a random order: the server orders sets), a read of both, a
//!   short pause (a client pause nemesis stalls here), then both balances
//!   written in one `POST /v1/txn` guarded by both locks' fencing tokens
//!   (it commits only while both still hold), then the release;
//! - once in five, an **audit**: a multi-lock over every account, a read
//!   of every balance, recorded as a `read` whose value is the list of
//!   balances (its invocation carries the expected total).
//!
//! History: the multi-lock's `acquire` (key = [`Settings::lock`], value =
//! the list of lock names) ok with the first token; `release` with the
//! same list; `transfer` (value `{from, to, amount}`) ok when the txn ran,
//! fail when its guard no longer held; `read`; and the session's loss as
//! for the lock workloads ([`super::session`]).
//!
//! [`Settings::initial_balance`]: super::Settings::initial_balance
//! [`Settings::lock`]: super::Settings::lock

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;

use super::holder::{self, Acquired, Sessions};
use super::session::{End, Session};
use super::{backoff, Ctx};
use crate::api::{Api, Reply};
use crate::history::{Value, F};
use crate::runlog::Call;

/// The node of account `i`.
pub fn account_path(i: usize) -> String {
    format!("jepsen/accounts/{i}")
}

/// The lock of account `i`.
pub fn account_lock(i: usize) -> String {
    format!("jepsen/acct/{i}")
}

/// The sum every audit must see.
pub fn expected_total(ctx: &Ctx) -> i64 {
    ctx.settings.initial_balance * ctx.settings.accounts as i64
}

/// One `multilock` client.
pub async fn client(ctx: Arc<Ctx>, idx: usize, mut rng: StdRng) {
    if !create_accounts(&ctx, idx, &mut rng).await {
        return;
    }
    let mut sessions = Sessions::new(idx);
    while let Some(session) = sessions.next(&ctx, &mut rng).await {
        let how = session_loop(&ctx, idx, &session, &mut rng).await;
        sessions.ended(&ctx, session, how);
    }
}

/// Creates every account that does not exist yet; false if the run
/// stopped first.
async fn create_accounts(ctx: &Ctx, idx: usize, rng: &mut StdRng) -> bool {
    let initial = ctx.settings.initial_balance.to_string();
    for i in 0..ctx.settings.accounts {
        loop {
            if ctx.stopping() {
                return false;
            }
            let node = ctx.clients[idx].route.pick(rng);
            let reply = ctx
                .client_api
                .put_node(node, &account_path(i), initial.as_bytes(), Some(0))
                .await;
            match reply {
                Reply::Ok(()) => break,
                Reply::Fail(e) if e.code == "version_mismatch" => break,
                _ => backoff(ctx, rng).await,
            }
        }
    }
    true
}

/// Transfers and audits on one session until it must end; says how.
async fn session_loop(ctx: &Ctx, idx: usize, session: &Session, rng: &mut StdRng) -> End {
    loop {
        if let Some(why) = session.lost(ctx) {
            return End::Lost(why);
        }
        if ctx.stopping() {
            return End::Quiet;
        }
        let step = if rng.random_range(0..5) == 0 {
            audit(ctx, idx, session, rng).await
        } else {
            transfer(ctx, idx, session, rng).await
        };
        if let Some(end) = step {
            return end;
        }
    }
}

/// The multi-lock's locks as the history records them.
fn locks_value(locks: &[String]) -> Value {
    Value::List(locks.iter().map(|l| Value::Str(l.clone())).collect())
}

/// Takes `sent` (recording `recorded` as the locks taken): the locks
/// really taken, with their tokens, as [`holder::acquire`] says.
async fn take(
    ctx: &Ctx,
    idx: usize,
    session: &Session,
    (recorded, sent): (&[String], &[String]),
    rng: &mut StdRng,
) -> Acquired<Vec<(String, u64)>> {
    let call = Call {
        pid: session.pid,
        f: F::Acquire,
        key: ctx.settings.lock.clone(),
        value: locks_value(recorded),
        token: None,
    };
    let send = |node, wait_ms| async move {
        ctx.client_api
            .multi_acquire(node, sent, &session.id, wait_ms)
            .await
    };
    match holder::acquire(
        ctx,
        idx,
        session,
        call,
        rng,
        |t: &Vec<u64>| t.first().copied(),
        send,
    )
    .await
    {
        Acquired::Held(tokens) => Acquired::Held(sent.iter().cloned().zip(tokens).collect()),
        Acquired::Retry => Acquired::Retry,
        Acquired::End(end) => Acquired::End(end),
    }
}

/// Reads the balances of `accounts` (linearizable reads); `None` if one
/// read failed or is not a number.
async fn balances(api: &Api, node: u64, accounts: &[usize]) -> Option<Vec<i64>> {
    let mut out = Vec::with_capacity(accounts.len());
    for &i in accounts {
        let Reply::Ok(Some(data)) = api.get_node(node, &account_path(i)).await else {
            return None;
        };
        out.push(std::str::from_utf8(&data.data).ok()?.parse().ok()?);
    }
    Some(out)
}

/// One transfer; `Some` when the session must end.
async fn transfer(ctx: &Ctx, idx: usize, session: &Session, rng: &mut StdRng) -> Option<End> {
    let n = ctx.settings.accounts;
    let from = rng.random_range(0..n);
    let to = (from + rng.random_range(1..n)) % n;
    let amount: i64 = rng.random_range(1..=5);
    let mut recorded = vec![account_lock(from), account_lock(to)];
    if rng.random_bool(0.5) {
        recorded.reverse();
    }
    // The injected bug: only the account taken from is locked.
    let buggy = ctx.settings.inject_multi_one_lock && idx % 2 == 1;
    let sent = if buggy {
        vec![account_lock(from)]
    } else {
        recorded.clone()
    };
    let held = match take(ctx, idx, session, (&recorded, &sent), rng).await {
        Acquired::Held(held) => held,
        Acquired::End(end) => return Some(end),
        Acquired::Retry => return None,
    };
    let node = ctx.clients[idx].route.pick(rng);
    if let Some([a, b]) = balances(&ctx.client_api, node, &[from, to])
        .await
        .as_deref()
    {
        // Work under the locks; a paused client stalls here, holding them.
        let pause = rng.random_range(0..=ctx.settings.max_hold_ms / 2);
        ctx.pause_for(Duration::from_millis(pause)).await;
        ctx.clients[idx].wait_unpaused().await;
        let call = Call {
            pid: session.pid,
            f: F::Other("transfer".into()),
            key: ctx.settings.lock.clone(),
            value: Value::Map(
                [
                    ("from".to_string(), Value::Int(from as i64)),
                    ("to".to_string(), Value::Int(to as i64)),
                    ("amount".to_string(), Value::Int(amount)),
                ]
                .into(),
            ),
            token: held.first().map(|h| h.1),
        };
        let puts = [
            (account_path(from), (a - amount).to_string().into_bytes()),
            (account_path(to), (b + amount).to_string().into_bytes()),
        ];
        ctx.log.invoke(&call);
        match ctx.client_api.guarded_puts(node, &held, &puts).await {
            Reply::Ok(true) => ctx.log.ok(&call, call.value.clone()),
            Reply::Ok(false) => ctx.log.fail(&call, "a lock no longer held"),
            Reply::Fail(e) => ctx.log.fail(&call, &e.text()),
            Reply::Info(e) => ctx.log.info(&call, &e.text()),
        }
    }
    let released = release(ctx, idx, session, (&recorded, &sent), rng).await;
    ctx.set_holding(idx, false);
    released
}

/// One audit: every account under one multi-lock, read and recorded.
async fn audit(ctx: &Ctx, idx: usize, session: &Session, rng: &mut StdRng) -> Option<End> {
    let all: Vec<String> = (0..ctx.settings.accounts).map(account_lock).collect();
    let held = match take(ctx, idx, session, (&all, &all), rng).await {
        Acquired::Held(held) => held,
        Acquired::End(end) => return Some(end),
        Acquired::Retry => return None,
    };
    let node = ctx.clients[idx].route.pick(rng);
    let token = held.first().map(|h| h.1);
    record_audit(ctx, &ctx.client_api, (session.pid, node), token).await;
    let released = release(ctx, idx, session, (&all, &all), rng).await;
    ctx.set_holding(idx, false);
    released
}

/// Reads every balance through `api`'s `node` as process `pid` and
/// records the read (ok with the balances, or fail). True when it read
/// them all.
pub async fn record_audit(
    ctx: &Ctx,
    api: &Api,
    (pid, node): (u64, u64),
    token: Option<u64>,
) -> bool {
    let accounts: Vec<usize> = (0..ctx.settings.accounts).collect();
    let call = Call {
        pid,
        f: F::Read,
        key: "accounts".into(),
        value: Value::Int(expected_total(ctx)),
        token,
    };
    ctx.log.invoke(&call);
    match balances(api, node, &accounts).await {
        Some(read) => {
            ctx.log.ok(
                &call,
                Value::List(read.into_iter().map(Value::Int).collect()),
            );
            true
        }
        None => {
            ctx.log.fail(&call, "a balance could not be read");
            false
        }
    }
}

/// Releases the multi-lock, as [`holder::release`].
async fn release(
    ctx: &Ctx,
    idx: usize,
    session: &Session,
    (recorded, sent): (&[String], &[String]),
    rng: &mut StdRng,
) -> Option<End> {
    holder::release(
        ctx,
        idx,
        session,
        locks_value(recorded),
        rng,
        |node| async move { ctx.client_api.multi_release(node, sent, &session.id).await },
    )
    .await
}

/// The quiet phase's audit: a fresh session on `node` takes every account
/// and records the balances. Err says why it could not.
pub async fn final_audit(ctx: &Ctx, node: u64) -> Result<(), String> {
    let api = &ctx.api;
    let session = match api.open_session(node, 10_000, "jepsen-final-audit").await {
        Reply::Ok(id) => id,
        Reply::Fail(e) | Reply::Info(e) => return Err(e.text()),
    };
    let all: Vec<String> = (0..ctx.settings.accounts).map(account_lock).collect();
    let result = match api.multi_acquire(node, &all, &session, 5_000).await {
        Reply::Ok(tokens) => {
            let pid = ctx.next_pid();
            if record_audit(ctx, api, (pid, node), tokens.first().copied()).await {
                Ok(())
            } else {
                Err("a balance could not be read".into())
            }
        }
        Reply::Fail(e) | Reply::Info(e) => Err(e.text()),
    };
    let _ = api.close_session(node, &session).await;
    result
}
