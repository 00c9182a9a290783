//! The run report: every file is written and says what it should.

mod common;

use common::{parse, simulate_register};
use raftlock_jepsen::{
    check_history, write_run_report, CheckOptions, Event, EventType, History, Process,
};

/// A simulated register run with two faults in the history.
fn run_with_faults() -> History {
    let sim = simulate_register(7, 5, 400, 2, 3);
    let end = sim.end_time();
    let mut events = sim.events().to_vec();
    let fault =
        |f: &str, name: &str, t: u64| Event::new(Process::Nemesis, EventType::Info, f, name).at(t);
    events.push(fault("start", "partition-majority", end / 5));
    events.push(fault("stop", "partition-majority", end / 3));
    events.push(fault("start", "kill n2", end / 2));
    events.sort_by_key(|e| e.time);
    let mut h = History::new();
    for e in events {
        // 0.2 ms per simulated tick: a run of about a second and a half.
        let t = e.time * 200_000;
        h.push(e.at(t));
    }
    h
}

#[test]
fn report_has_every_file() {
    let h = run_with_faults();
    let results = check_history(&h, &CheckOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = write_run_report(dir.path(), &h, &results).unwrap();

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files.results).unwrap()).unwrap();
    assert_eq!(json["verdict"], "valid", "{json:#}");
    assert_eq!(json["checkers"].as_array().unwrap().len(), 2);
    assert_eq!(json["faults"].as_array().unwrap().len(), 2);
    let counts = &json["counts"]["read"];
    assert!(counts["ok"].as_u64().unwrap() > 0);

    let back = History::load_jsonl(&files.history_jsonl).unwrap();
    assert_eq!(back, h);
    let edn = std::fs::read_to_string(&files.history_edn).unwrap();
    assert_eq!(edn.lines().count(), h.len());
    assert!(edn.contains(":process :nemesis, :f :start, :value \"kill n2\""));

    let html = std::fs::read_to_string(&files.timeline).unwrap();
    assert!(html.contains("class=\"fault\""));
    assert!(html.contains("partition-majority"));
    assert!(html.contains("process 0"));
    assert!(html.contains("title=\"#0 p"));
    assert!(
        !html.contains("<script src") && !html.contains("http"),
        "self-contained"
    );

    for png in [&files.latency, &files.throughput] {
        let bytes = std::fs::read(png).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{png:?} is a PNG");
        assert!(bytes.len() > 10_000, "{png:?} has content");
    }

    // Keep a copy for eyeballing when asked to.
    if let Ok(out) = std::env::var("JEPSEN_REPORT_SAMPLE") {
        write_run_report(std::path::Path::new(&out), &h, &results).unwrap();
    }
}

#[test]
fn invalid_run_highlights_the_culprit() {
    let h = parse(
        "0 1 invoke write k=x 1
         10 1 ok write k=x 1
         20 2 invoke read k=x
         30 2 ok read k=x 5",
    );
    let results = check_history(&h, &CheckOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = write_run_report(dir.path(), &h, &results).unwrap();
    let html = std::fs::read_to_string(&files.timeline).unwrap();
    assert!(html.contains("op ok bad"), "the bad read is outlined");
    assert!(html.contains("INVALID"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files.results).unwrap()).unwrap();
    assert_eq!(json["verdict"], "invalid");
}

#[test]
fn empty_history_still_reports() {
    let h = History::new();
    let results = check_history(&h, &CheckOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = write_run_report(dir.path(), &h, &results).unwrap();
    assert!(files.latency.exists() && files.throughput.exists() && files.timeline.exists());
}
