//! A compact notation for hand-built histories, one event per line:
//!
//! ```text
//! TIME PROCESS TYPE F [k=KEY] [t=TOKEN] [VALUE-as-JSON]
//! 0  1 invoke write k=x 1
//! 10 1 ok     write k=x 1
//! 12 nemesis info start "partition"
//! ```
//! `#` starts a comment. Times are in nanoseconds.
#![allow(dead_code)]

use raftlock_jepsen::checker::linear::LinearConfig;
use raftlock_jepsen::{
    check_history, CheckOptions, CheckResult, Event, EventType, History, Process, Value, Verdict,
    Workload,
};

pub fn parse(text: &str) -> History {
    let mut h = History::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let time: u64 = words.next().unwrap().parse().unwrap();
        let process = match words.next().unwrap() {
            "nemesis" => Process::Nemesis,
            p => Process::Client(p.parse().unwrap()),
        };
        let kind = match words.next().unwrap() {
            "invoke" => EventType::Invoke,
            "ok" => EventType::Ok,
            "fail" => EventType::Fail,
            "info" => EventType::Info,
            other => panic!("bad type {other}"),
        };
        let f = words.next().unwrap();
        let mut e = Event::new(process, kind, f, Value::Nil).at(time);
        for w in words {
            if let Some(k) = w.strip_prefix("k=") {
                e = e.with_key(k);
            } else if let Some(t) = w.strip_prefix("t=") {
                e = e.with_token(t.parse().unwrap());
            } else {
                e.value = serde_json::from_str(w).unwrap();
            }
        }
        h.push(e);
    }
    h
}

pub fn run(workload: Workload, text: &str) -> Vec<CheckResult> {
    let opts = CheckOptions {
        workload: Some(workload),
        linear: LinearConfig {
            max_steps: 1_000_000,
            time_limit: None,
        },
    };
    check_history(&parse(text), &opts).unwrap()
}

/// The verdict of the checker whose name starts with `name`.
pub fn verdict(results: &[CheckResult], name: &str) -> Verdict {
    results
        .iter()
        .find(|r| r.checker.starts_with(name))
        .unwrap_or_else(|| panic!("no checker {name} in {results:#?}"))
        .verdict
}

pub fn explanation(results: &[CheckResult], name: &str) -> String {
    results
        .iter()
        .find(|r| r.checker.starts_with(name))
        .and_then(|r| r.explanation.clone())
        .unwrap_or_default()
}

/// A tiny deterministic PRNG (SplitMix64), so generated histories are the
/// same on every machine and every version of every crate.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Simulates a linearizable register service under concurrency: each op is
/// applied atomically at a random instant between its invoke and its
/// completion, so the history is linearizable by construction. About
/// `info_pct` percent of ops end `info`, half of those having taken effect.
/// Values written are non-negative, so a read of -1 is impossible.
pub fn simulate_register(
    seed: u64,
    processes: u64,
    ops: usize,
    keys: u64,
    info_pct: u64,
) -> History {
    #[derive(Clone)]
    enum Stage {
        Idle,
        Invoked {
            f: &'static str,
            key: String,
            arg: Value,
        },
        Applied {
            f: &'static str,
            key: String,
            arg: Value,
            result: Value,
            lost: bool,
        },
    }
    let mut rng = Rng(seed);
    let mut h = History::new();
    let mut state: std::collections::HashMap<String, Value> = Default::default();
    let mut stages = vec![Stage::Idle; processes as usize];
    let mut ids: Vec<u64> = (0..processes).collect();
    let mut next_id = processes;
    let mut started = 0;
    let mut time = 0u64;
    let mut next_value = 0i64;
    while started < ops || stages.iter().any(|s| !matches!(s, Stage::Idle)) {
        time += 1 + rng.below(5);
        let slot = rng.below(processes) as usize;
        let p = Process::Client(ids[slot]);
        match stages[slot].clone() {
            Stage::Idle if started < ops => {
                started += 1;
                let key = format!("k{}", rng.below(keys));
                let (f, arg) = match rng.below(10) {
                    0..=3 => ("read", Value::Nil),
                    4..=7 => {
                        next_value += 1;
                        ("write", Value::Int(next_value))
                    }
                    _ => {
                        let cur = state.get(&key).and_then(Value::as_int).unwrap_or(0);
                        let expected = if rng.below(2) == 0 { cur } else { cur + 1 };
                        next_value += 1;
                        (
                            "cas",
                            Value::List(vec![Value::Int(expected), Value::Int(next_value)]),
                        )
                    }
                };
                h.push(
                    Event::new(p, EventType::Invoke, f, arg.clone())
                        .with_key(&key)
                        .at(time),
                );
                stages[slot] = Stage::Invoked { f, key, arg };
            }
            Stage::Idle => {}
            Stage::Invoked { f, key, arg } => {
                let lost = rng.below(100) < info_pct;
                if lost && rng.below(2) == 0 {
                    // Never takes effect; the client times out.
                    h.push(
                        Event::new(p, EventType::Info, f, arg)
                            .with_key(&key)
                            .at(time),
                    );
                    stages[slot] = Stage::Idle;
                    ids[slot] = next_id;
                    next_id += 1;
                    continue;
                }
                let cur = state.get(&key).cloned().unwrap_or(Value::Nil);
                let result = match f {
                    "read" => cur,
                    "write" => {
                        state.insert(key.clone(), arg.clone());
                        arg.clone()
                    }
                    _ => {
                        let Value::List(v) = &arg else { unreachable!() };
                        let swap = cur == v[0];
                        if swap {
                            state.insert(key.clone(), v[1].clone());
                        }
                        Value::Bool(swap)
                    }
                };
                stages[slot] = Stage::Applied {
                    f,
                    key,
                    arg,
                    result,
                    lost,
                };
            }
            Stage::Applied {
                f,
                key,
                arg,
                result,
                lost,
            } => {
                let e = if lost {
                    Event::new(p, EventType::Info, f, arg)
                } else {
                    Event::new(p, EventType::Ok, f, result)
                };
                h.push(e.with_key(&key).at(time));
                stages[slot] = Stage::Idle;
                if lost {
                    ids[slot] = next_id;
                    next_id += 1;
                }
            }
        }
    }
    h
}

/// Replaces the value of the `n`th ok read (wrapping) with -1, a value no
/// write produces. Returns false if the history has no ok read.
pub fn corrupt_a_read(h: &History, n: usize) -> Option<History> {
    let reads: Vec<usize> = h
        .events()
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == EventType::Ok && e.f.as_str() == "read")
        .map(|(i, _)| i)
        .collect();
    if reads.is_empty() {
        return None;
    }
    let mut events = h.events().to_vec();
    events[reads[n % reads.len()]].value = Value::Int(-1);
    Some(History::from_events(events).unwrap())
}
