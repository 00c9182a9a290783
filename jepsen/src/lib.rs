//! The analysis half of raftlock's Jepsen-style harness.
//!
//! A run records every client operation as invoke/ok/fail/info
//! [`history::Event`]s (with the nemesis's faults in the same history),
//! then judges the history with [`checker::check_history`] and writes a
//! report with [`report::write_run_report`]. Everything here is pure and
//! deterministic: the same history always gets the same verdict, so a saved
//! `history.jsonl` can be re-checked at any time (`raftlock-jepsen check`).
//!
//! - [`history`]: events, operations, JSON lines and EDN, the [`Recorder`];
//! - [`model`]: sequential specifications (register, mutex);
//! - [`checker`]: linearizability (Wing–Gong–Lowe with memoization), the
//!   fencing checker, the no-lost-acknowledged-write checker;
//! - [`report`]: `results.json`, `history.edn`, `history.jsonl`,
//!   `timeline.html`, latency and throughput PNGs.
//!
//! The run driver (`raftlock-jepsen test`) drives a real cluster:
//!
//! - [`control`]: `raftlock serve` processes, kill -9 / pause / restart;
//! - [`member`]: `raftlock-jepsen member`, a member whose lock clients are
//!   embedded in its process (the embedded-client mode);
//! - [`proxy`]: a TCP proxy per directed inter-node link (cut, delay);
//! - [`api`]: one-request HTTP calls classified ok / fail / info;
//! - [`workload`]: the `mutex`, `fenced` and `register` clients, and how
//!   they reach the cluster (sticky, random, embedded);
//! - [`nemesis`]: the seeded fault schedule;
//! - [`runlog`]: the history being recorded (with backdated expiries);
//! - [`runner`]: one run, start to report.
//!
//! [`Recorder`]: history::Recorder

pub mod api;
pub mod checker;
pub mod control;
pub mod history;
pub mod member;
pub mod model;
pub mod nemesis;
pub mod proxy;
pub mod report;
pub mod runlog;
pub mod runner;
pub mod workload;

pub use checker::{check_history, CheckOptions, CheckResult, Verdict, Workload};
pub use history::{Event, EventType, History, Operation, Process, Recorder, Value, F};
pub use report::write_run_report;
