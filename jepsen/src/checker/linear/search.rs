//! The Wing–Gong–Lowe search with memoization (as in Porcupine/Knossos).
//!
//! Call and return events of one partition are put in a doubly linked list
//! in time order. The search walks the list from the front: a call entry
//! seen before any return entry is a candidate to linearize next (it began
//! before every pending op ended). Linearizing it applies the model, and
//! "lifts" its call and return entries out of the list. Reaching a return
//! entry means the op it belongs to had to be linearized by now and could
//! not be: undo the last choice (backtrack) and try the next candidate.
//!
//! Memoization: a (set of linearized ops, model state) pair that was
//! explored once can only fail again, so it is never explored twice. This
//! turns the exponential worst case into one bounded by distinct pairs.
//!
//! `info` ops have no return entry: they never force anything, may be
//! linearized at any point after their call, and need not be linearized at
//! all. The search succeeds when every `ok` op is linearized.

use super::bitset::{Bitset, FastBuild, MemoKeys};
use crate::model::Model;
use std::collections::HashSet;
use std::time::Instant;

/// One operation as the search sees it.
pub(super) struct SearchOp<I, O> {
    pub(super) input: I,
    pub(super) output: O,
    pub(super) call: u64,
    /// `None` = infinity (unknown outcome).
    pub(super) ret: Option<u64>,
}

/// Limits; exceeding one yields `Unknown`, never a guess.
pub(super) struct Budget {
    pub(super) max_steps: u64,
    pub(super) deadline: Option<Instant>,
}

/// The deepest point the search reached before getting stuck.
pub(super) struct Stuck<S> {
    /// Ops linearized in order (positions in the partition's op list).
    pub(super) prefix: Vec<usize>,
    /// Model state after the prefix.
    pub(super) state: S,
    /// The op whose return entry was reached without being linearized.
    pub(super) blocking: usize,
    /// Ops that were candidates at that point, with whether the model
    /// accepted each one from `state` (accepted ones led to dead ends).
    pub(super) candidates: Vec<(usize, bool)>,
}

/// What the search concluded.
pub(super) enum Outcome<S> {
    /// A linearization exists.
    Valid,
    /// None exists; the deepest attempt is attached.
    Invalid(Stuck<S>),
    /// The budget ran out first.
    Unknown(&'static str),
}

const HEAD: usize = 0;
const NONE: usize = usize::MAX;

/// The entry list: node 0 is the head sentinel, the last node the tail
/// sentinel, and each op has a call node and, unless `info`, a return node.
struct Entries {
    next: Vec<usize>,
    prev: Vec<usize>,
    /// For each node: (op, is_call); sentinels are (NONE, false).
    node: Vec<(usize, bool)>,
    /// For each op: its return node, or NONE.
    ret_node: Vec<usize>,
    tail: usize,
}

impl Entries {
    fn build<I, O>(ops: &[SearchOp<I, O>]) -> Self {
        // (time, calls before returns at equal times, op): ops that touch
        // at the same instant count as concurrent, the lenient reading.
        let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            events.push((op.call, false, i));
            if let Some(r) = op.ret {
                events.push((r, true, i));
            }
        }
        events.sort_unstable();
        let n = events.len() + 2;
        let tail = n - 1;
        let mut node = vec![(NONE, false); n];
        let mut ret_node = vec![NONE; ops.len()];
        for (pos, &(_, is_ret, op)) in events.iter().enumerate() {
            node[pos + 1] = (op, !is_ret);
            if is_ret {
                ret_node[op] = pos + 1;
            }
        }
        Entries {
            next: (1..=n).map(|i| if i == n { NONE } else { i }).collect(),
            prev: (0..n).map(|i| i.wrapping_sub(1)).collect(),
            node,
            ret_node,
            tail,
        }
    }

    fn unlink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = n;
        self.prev[n] = p;
    }

    fn relink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = e;
        self.prev[n] = e;
    }

    /// Removes a call node and its return node.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        let r = self.ret_node[self.node[call].0];
        if r != NONE {
            self.unlink(r);
        }
    }

    /// Exactly undoes `lift` (dancing links: relink in reverse order).
    fn unlift(&mut self, call: usize) {
        let r = self.ret_node[self.node[call].0];
        if r != NONE {
            self.relink(r);
        }
        self.relink(call);
    }
}

/// Runs the search over one partition.
pub(super) fn search<M: Model>(
    model: &M,
    ops: &[SearchOp<M::Input, M::Output>],
    budget: &Budget,
) -> (Outcome<M::State>, u64) {
    let mut list = Entries::build(ops);
    let mut remaining_ok = ops.iter().filter(|o| o.ret.is_some()).count();
    let mut state = model.init();
    let mut linearized = Bitset::new(ops.len());
    let keys = MemoKeys::new(ops.len(), (0..ops.len()).filter(|&i| ops[i].ret.is_none()));
    let mut cache: HashSet<(Box<[u64]>, M::State), FastBuild> = HashSet::default();
    let mut calls: Vec<Choice<M::State>> = Vec::new();
    let mut stuck: Option<Stuck<M::State>> = None;
    let mut steps: u64 = 0;
    let mut entry = list.next[HEAD];

    loop {
        if remaining_ok == 0 {
            return (Outcome::Valid, steps);
        }
        steps += 1;
        if steps > budget.max_steps {
            return (Outcome::Unknown("step budget exhausted"), steps);
        }
        if steps.is_multiple_of(4096) && budget.deadline.is_some_and(|d| Instant::now() >= d) {
            return (Outcome::Unknown("time limit reached"), steps);
        }
        let (op, is_call) = list.node[entry];
        if is_call {
            if let Some(next_state) = model.step(&state, &ops[op].input, &ops[op].output) {
                linearized.set(op);
                if cache.insert((keys.encode(&linearized), next_state.clone())) {
                    calls.push(Choice {
                        entry,
                        state: std::mem::replace(&mut state, next_state),
                    });
                    list.lift(entry);
                    if ops[op].ret.is_some() {
                        remaining_ok -= 1;
                    }
                    entry = list.next[HEAD];
                    continue;
                }
                linearized.clear(op);
            }
            entry = list.next[entry];
        } else {
            // A return entry (or the tail): its op cannot wait any longer,
            // and no candidate before it works. Undo the last choice.
            if stuck.as_ref().is_none_or(|s| calls.len() > s.prefix.len()) {
                stuck = Some(describe_stuck(model, ops, &list, &calls, &state, entry));
            }
            let Some(choice) = calls.pop() else {
                let outcome = match stuck {
                    Some(s) => Outcome::Invalid(s),
                    None => Outcome::Unknown("no failure point recorded"),
                };
                return (outcome, steps);
            };
            let op = list.node[choice.entry].0;
            state = choice.state;
            linearized.clear(op);
            list.unlift(choice.entry);
            if ops[op].ret.is_some() {
                remaining_ok += 1;
            }
            entry = list.next[choice.entry];
        }
    }
}

/// A linearization choice, kept to undo it.
struct Choice<S> {
    /// The call entry that was lifted.
    entry: usize,
    /// The model state before it.
    state: S,
}

fn describe_stuck<M: Model>(
    model: &M,
    ops: &[SearchOp<M::Input, M::Output>],
    list: &Entries,
    calls: &[Choice<M::State>],
    state: &M::State,
    blocking_entry: usize,
) -> Stuck<M::State> {
    let mut candidates = Vec::new();
    let mut e = list.next[HEAD];
    while e != blocking_entry && e != list.tail && e != NONE {
        let (op, is_call) = list.node[e];
        if is_call {
            let ok = model.step(state, &ops[op].input, &ops[op].output).is_some();
            candidates.push((op, ok));
        }
        e = list.next[e];
    }
    let blocking = if blocking_entry == list.tail {
        candidates.first().map_or(0, |c| c.0)
    } else {
        list.node[blocking_entry].0
    };
    Stuck {
        prefix: calls.iter().map(|c| list.node[c.entry].0).collect(),
        state: state.clone(),
        blocking,
        candidates,
    }
}
