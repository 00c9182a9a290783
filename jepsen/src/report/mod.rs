//! Run reports: everything a person needs to judge a run, in one directory.
//!
//! [`write_run_report`] writes:
//! - `results.json`: overall verdict, each checker's result, counts per f;
//! - `history.jsonl` and `history.edn`: the history, ours and Jepsen's;
//! - `timeline.html`: ops per process over time, faults shaded;
//! - `latency.png` and `throughput.png`.

pub mod plots;
pub mod results;
pub mod timeline;

pub use results::{Counts, RunResults};

use crate::checker::CheckResult;
use crate::history::{History, HistoryError};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The history cannot be paired into operations (the raw history files
    /// were still written).
    #[error("history is malformed: {0}")]
    History(#[from] HistoryError),
    /// A plot failed to render.
    #[error("plotting {path}: {message}")]
    Plot {
        /// The file.
        path: PathBuf,
        /// What plotters said.
        message: String,
    },
}

/// The files a report consists of.
#[derive(Debug, Clone)]
pub struct ReportFiles {
    /// `results.json`.
    pub results: PathBuf,
    /// `history.jsonl`.
    pub history_jsonl: PathBuf,
    /// `history.edn`.
    pub history_edn: PathBuf,
    /// `timeline.html`.
    pub timeline: PathBuf,
    /// `latency.png`.
    pub latency: PathBuf,
    /// `throughput.png`.
    pub throughput: PathBuf,
}

fn write_file(
    path: &Path,
    f: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), ReportError> {
    let io = |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::create(path).map_err(io)?;
    f(&mut file).map_err(io)?;
    file.flush().map_err(io)
}

/// Writes the full report for a checked history into `dir` (created if
/// missing) and returns the paths. The history files are written first, so
/// even a malformed history is kept for inspection.
pub fn write_run_report(
    dir: &Path,
    history: &History,
    results: &[CheckResult],
) -> Result<ReportFiles, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let files = ReportFiles {
        results: dir.join("results.json"),
        history_jsonl: dir.join("history.jsonl"),
        history_edn: dir.join("history.edn"),
        timeline: dir.join("timeline.html"),
        latency: dir.join("latency.png"),
        throughput: dir.join("throughput.png"),
    };
    write_file(&files.history_jsonl, |f| history.write_jsonl(f))?;
    write_file(&files.history_edn, |f| history.write_edn(f))?;

    let ops = history.operations()?;
    let run = RunResults::new(history, &ops, results);
    write_file(&files.results, |f| {
        serde_json::to_writer_pretty(&mut *f, &run)?;
        f.write_all(b"\n")
    })?;

    let end = history.end_time();
    let faults = history.faults();
    let plot_err = |path: &Path| {
        let path = path.to_path_buf();
        move |message| ReportError::Plot { path, message }
    };
    plots::latency(&files.latency, &ops, &faults, end).map_err(plot_err(&files.latency))?;
    plots::throughput(&files.throughput, &ops, &faults, end)
        .map_err(plot_err(&files.throughput))?;

    let html = timeline::render(&run, &ops, end, &["latency.png", "throughput.png"]);
    write_file(&files.timeline, |f| f.write_all(html.as_bytes()))?;
    Ok(files)
}
