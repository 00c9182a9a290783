//! Unrecorded load on every fresh cluster before it is measured, until the
//! servers' cost per operation has settled: the same rule for every
//! system. A fresh ZooKeeper is its JIT still compiling, and the
//! compiler's threads are the server process's CPU: measured at once, the
//! first 5 s of one-client lock cycles cost ZooKeeper 5.3 ms of server
//! CPU per cycle, the rounds after 18 s of load 1.7–2.1 ms; a fixed 8 s
//! of warm-up still left the first measured phases slow and expensive,
//! which the self-check then rejected. A cluster that has been running is
//! warm, so the bench measures that.
//!
//! Each round is a few seconds of the uncontended lock loop and of puts
//! at [`CLIENTS`] clients (the two write paths every workload uses); the
//! warm-up ends when two rounds in a row agree on server CPU per cycle
//! and per put within [`SETTLED_WITHIN`] and the servers' JIT compiler
//! threads (a JVM's; other servers have none) took at most
//! [`JIT_SHARE`] of the servers' CPU in the last round, after at least
//! [`MIN_ROUNDS`], or after [`MAX_SECS`] in all. Agreement alone is not
//! enough: a fresh ZooKeeper's first two rounds agreed at four times the
//! CPU per cycle it settled at later, its compilers still busy.

use std::time::Instant;

use crate::backend::Backend;
use crate::procfs::{jit_ticks, TICKS_PER_SEC};
use crate::progress::say;
use crate::workload::{put, uncontended};

/// Clients of every warm-up round (the busiest latency row's count).
pub const CLIENTS: usize = 64;
/// Seconds of lock cycles, then of puts, per round.
const CYCLE_SECS: f64 = 3.0;
const PUT_SECS: f64 = 1.5;
/// Rounds that always run (the first is the fresh cluster).
const MIN_ROUNDS: usize = 2;
/// Two successive rounds' server CPU per operation differ by at most this
/// fraction when the cluster has settled (the rows of a warm ZooKeeper
/// spread about ±10% round to round on this machine).
const SETTLED_WITHIN: f64 = 0.15;
/// Most of the servers' CPU their JIT compilers may take in a settled
/// round.
const JIT_SHARE: f64 = 0.02;
/// Longest warm-up; a cluster still moving then is measured anyway, with
/// a note.
pub const MAX_SECS: f64 = 120.0;

/// What the warm-up did.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmUp {
    pub rounds: usize,
    pub secs: f64,
    /// Server CPU per cycle and per put of the last round, in µs.
    pub cycle_cpu_us: f64,
    pub put_cpu_us: f64,
    /// The JIT compilers' share of the servers' CPU in the last round.
    pub jit_share: f64,
    pub settled: bool,
}

/// One round's server CPU per cycle and per put, µs.
type Round = (f64, f64);

/// Whether `now` agrees with `before` on both figures.
fn settled(before: Round, now: Round) -> bool {
    let close = |a: f64, b: f64| {
        a.is_finite() && b.is_finite() && a > 0.0 && (b / a - 1.0).abs() <= SETTLED_WITHIN
    };
    close(before.0, now.0) && close(before.1, now.1)
}

/// Serves warm-up rounds until the cluster has settled (see the module
/// docs). Errors of the load itself end the warm-up early, unsettled.
pub async fn until_settled<B: Backend>(
    b: &B,
    pids: &[u32],
    leader: usize,
    members: usize,
) -> WarmUp {
    let start = Instant::now();
    let mut last: Option<Round> = None;
    let mut out = WarmUp {
        rounds: 0,
        secs: 0.0,
        cycle_cpu_us: f64::NAN,
        put_cpu_us: f64::NAN,
        jit_share: f64::NAN,
        settled: false,
    };
    let jit = || pids.iter().map(|&p| jit_ticks(p)).sum::<u64>();
    while start.elapsed().as_secs_f64() + CYCLE_SECS + PUT_SECS <= MAX_SECS {
        let jit_before = jit();
        let cycles =
            uncontended::run(b, pids, leader, members, CLIENTS, CYCLE_SECS, false, 0).await;
        let puts = put::run(b, pids, leader, members, CLIENTS, PUT_SECS, false, 0).await;
        let (Ok(cycles), Ok(puts)) = (cycles, puts) else {
            break;
        };
        out.rounds += 1;
        let jit_s = jit().saturating_sub(jit_before) as f64 / TICKS_PER_SEC;
        out.jit_share = jit_s / (cycles.cpu.servers_s + puts.cpu.servers_s).max(1e-9);
        let now = (cycles.server_cpu_us_per_cycle, puts.server_cpu_us_per_put);
        (out.cycle_cpu_us, out.put_cpu_us) = now;
        let done = last.is_some_and(|before| settled(before, now)) && out.jit_share <= JIT_SHARE;
        last = Some(now);
        if done && out.rounds >= MIN_ROUNDS {
            out.settled = true;
            break;
        }
    }
    out.secs = start.elapsed().as_secs_f64();
    say(format!(
        "  warm-up: {} rounds in {:.0} s, {}; last round {:.0} µs server CPU per cycle, \
         {:.0} per put, {:.1}% of it JIT compiling",
        out.rounds,
        out.secs,
        if out.settled {
            "settled"
        } else {
            "NOT settled"
        },
        out.cycle_cpu_us,
        out.put_cpu_us,
        out.jit_share * 100.0
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::settled;

    #[test]
    fn settles_only_when_both_figures_agree() {
        assert!(settled((400.0, 100.0), (430.0, 95.0)));
        assert!(!settled((742.0, 100.0), (416.0, 100.0)));
        assert!(!settled((400.0, 150.0), (400.0, 100.0)));
        assert!(!settled((f64::NAN, 100.0), (400.0, 100.0)));
        assert!(!settled((0.0, 100.0), (0.0, 100.0)));
    }
}
