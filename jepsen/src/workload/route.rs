//! Which member a client talks to.
//!
//! Real clients do not spray requests over the cluster. raftlock's HTTP
//! client sticks to the endpoint that last answered, and an embedded
//! application only ever talks to the node in its own process. A safety
//! bug that only one member has (a leader cut off from the majority that
//! keeps renewing sessions from memory) is invisible to clients
//! that reach it one request in three, so the default is [`Routing::Sticky`].
//!
//! - [`Routing::Sticky`]: client `i` starts on member `i mod n`; its ops
//!   *and* keepalives go there until a request is not delivered or not
//!   answered (refused connection, timeout, dropped connection, a member
//!   shutting down), then it moves to the next member. `no_leader` is an
//!   answer: the client stays (like an embedded client, which has no other
//!   node to go to), so clients of an isolated member stay with it.
//! - [`Routing::Random`]: every request to a random member (the old
//!   behaviour; keepalives too).
//!
//! Members are those of the [`Roster`] at the time: with the `membership`
//! nemesis a sticky client of a removed member moves on once that member
//! stops answering (it is killed after its removal), to the next member
//! that is still in the cluster, and random clients pick among the
//! current members.
//! - [`Routing::Embedded`]: client `i` lives in member `i mod n`
//!   (`raftlock-jepsen member`) and never moves; requests go to that
//!   member's control endpoint, see [`crate::member`].

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use raftlock_client::ErrorCode;
use rand::rngs::StdRng;

use crate::control::roster::Roster;

/// How clients pick the member for each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Routing {
    /// Stay on one member until it fails to answer.
    #[default]
    Sticky,
    /// A random member per request.
    Random,
    /// Clients embedded in the members' processes.
    Embedded,
}

impl Routing {
    /// The name on the command line (`--clients`).
    pub fn name(self) -> &'static str {
        match self {
            Routing::Sticky => "sticky",
            Routing::Random => "random",
            Routing::Embedded => "embedded",
        }
    }
}

impl fmt::Display for Routing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Routing {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sticky" => Ok(Routing::Sticky),
            "random" => Ok(Routing::Random),
            "embedded" => Ok(Routing::Embedded),
            other => Err(format!(
                "unknown client mode {other:?}; known: sticky, random, embedded"
            )),
        }
    }
}

/// The harness's own codes for a request that was not delivered or not
/// answered. With the API's codes that say this member cannot serve until
/// an operator acts or it has room (`ErrorCode::retry_elsewhere`:
/// shutting down, a failed or full disk, replaced data, at its connection
/// cap), they are the only reasons a sticky client leaves its member. The
/// Rust, Python and Go clients move on from these too; `no_leader` is not
/// one of them.
const UNREACHABLE: &[&str] = &["connect", "http_timeout", "transport"];

/// True when `code` says the member did not serve the request.
fn unreachable(code: &str) -> bool {
    UNREACHABLE.contains(&code) || ErrorCode::parse(code).is_some_and(ErrorCode::retry_elsewhere)
}

/// One client's member, shared by its op loop and its keepalive task.
#[derive(Debug)]
pub struct Route {
    /// How this client routes.
    routing: Routing,
    /// The cluster's members now.
    roster: Arc<Roster>,
    /// The member a sticky or embedded client talks to now.
    home: AtomicU64,
}

impl Route {
    /// Client `idx`'s route: it starts on member `idx mod n`.
    pub fn new(routing: Routing, roster: Arc<Roster>, idx: usize) -> Route {
        let home = roster.nth(idx).unwrap_or(1);
        Route {
            routing,
            roster,
            home: AtomicU64::new(home),
        }
    }

    /// The member for the next request.
    pub fn pick(&self, rng: &mut StdRng) -> u64 {
        match self.routing {
            Routing::Random => self
                .roster
                .pick(rng)
                .unwrap_or_else(|| self.home.load(Ordering::Relaxed)),
            _ => self.home.load(Ordering::Relaxed),
        }
    }

    /// The member a sticky or embedded client is attached to (`None` for
    /// random routing, which attaches to nobody).
    pub fn attached(&self) -> Option<u64> {
        (self.routing != Routing::Random).then(|| self.home.load(Ordering::Relaxed))
    }

    /// Notes the outcome of a request to `node` (its error code, `None`
    /// for an answer): a sticky client moves to the next member when
    /// `node` did not answer. Concurrent failures (op loop and keepalive)
    /// move it once.
    pub fn observe(&self, node: u64, code: Option<&str>) {
        if self.routing != Routing::Sticky || !code.is_some_and(unreachable) {
            return;
        }
        let Some(next) = self.roster.next_after(node) else {
            return;
        };
        let _ = self
            .home
            .compare_exchange(node, next, Ordering::Relaxed, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn sticky_moves_only_when_unanswered() {
        let route = Route::new(Routing::Sticky, Arc::new(Roster::new([1, 2, 3])), 4);
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(route.pick(&mut rng), 2);
        route.observe(2, None);
        route.observe(2, Some("no_leader"));
        route.observe(2, Some("session_not_found"));
        assert_eq!(route.pick(&mut rng), 2);
        route.observe(2, Some("connect"));
        assert_eq!(route.pick(&mut rng), 3);
        // A late failure report about the old member does not move it on.
        route.observe(2, Some("http_timeout"));
        assert_eq!(route.attached(), Some(3));
        route.observe(3, Some("http_timeout"));
        assert_eq!(route.pick(&mut rng), 1);
        // A member that stopped on a full disk is left too.
        route.observe(1, Some("disk_full"));
        assert_eq!(route.pick(&mut rng), 2);
    }

    #[test]
    fn embedded_never_moves_and_random_attaches_to_nobody() {
        let route = Route::new(Routing::Embedded, Arc::new(Roster::new([1, 2, 3])), 0);
        route.observe(1, Some("connect"));
        assert_eq!(route.attached(), Some(1));
        let random = Route::new(Routing::Random, Arc::new(Roster::new([1, 2, 3])), 0);
        assert_eq!(random.attached(), None);
        let mut rng = StdRng::seed_from_u64(3);
        let picks: std::collections::BTreeSet<u64> =
            (0..100).map(|_| random.pick(&mut rng)).collect();
        assert_eq!(picks.len(), 3);
    }

    #[test]
    fn a_client_of_a_removed_member_moves_to_a_current_one() {
        let roster = Arc::new(Roster::new([1, 2, 3, 4]));
        let route = Route::new(Routing::Sticky, Arc::clone(&roster), 1);
        assert_eq!(route.attached(), Some(2));
        roster.remove(2);
        roster.remove(3);
        // Still answered by the removed member: the client stays.
        route.observe(2, Some("no_leader"));
        assert_eq!(route.attached(), Some(2));
        // Killed: it moves past every removed id.
        route.observe(2, Some("connect"));
        assert_eq!(route.attached(), Some(4));
        let random = Route::new(Routing::Random, Arc::clone(&roster), 0);
        let mut rng = StdRng::seed_from_u64(5);
        let picks: std::collections::BTreeSet<u64> =
            (0..100).map(|_| random.pick(&mut rng)).collect();
        assert_eq!(picks, [1, 4].into());
    }

    #[test]
    fn names_round_trip() {
        for r in [Routing::Sticky, Routing::Random, Routing::Embedded] {
            assert_eq!(r.name().parse::<Routing>(), Ok(r));
        }
        assert!("bogus".parse::<Routing>().is_err());
    }
}
