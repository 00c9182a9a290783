//! One progress line on stderr while a phase runs: its label, elapsed time,
//! a count and its rate. Rewritten in place on a terminal, one line every
//! five seconds otherwise (logs stay readable).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

pub struct Progress {
    label: String,
    unit: &'static str,
    count: AtomicU64,
    start: Instant,
}

impl Progress {
    /// Starts printing; printing stops when the last `Arc` is dropped.
    pub fn start(label: impl Into<String>, unit: &'static str) -> Arc<Progress> {
        let p = Arc::new(Progress {
            label: label.into(),
            unit,
            count: AtomicU64::new(0),
            start: Instant::now(),
        });
        let weak = Arc::downgrade(&p);
        tokio::spawn(ticker(weak));
        p
    }

    pub fn add(&self, n: u64) {
        self.count.fetch_add(n, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn line(&self) -> String {
        let secs = self.start.elapsed().as_secs_f64();
        let n = self.count();
        let rate = if secs > 0.0 { n as f64 / secs } else { 0.0 };
        format!(
            "  {}: {:5.1} s  {} {}  ({:.0}/s)",
            self.label, secs, n, self.unit, rate
        )
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let mut err = std::io::stderr();
        if err.is_terminal() {
            let _ = writeln!(err, "\r{}\x1b[K", self.line());
        } else {
            let _ = writeln!(err, "{}", self.line());
        }
    }
}

async fn ticker(weak: Weak<Progress>) {
    let tty = std::io::stderr().is_terminal();
    let every = if tty {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(5)
    };
    loop {
        tokio::time::sleep(every).await;
        let Some(p) = weak.upgrade() else { return };
        let mut err = std::io::stderr();
        if tty {
            let _ = write!(err, "\r{}\x1b[K", p.line());
            let _ = err.flush();
        } else {
            let _ = writeln!(err, "{}", p.line());
        }
    }
}

/// A plain status line (phase changes).
pub fn say(text: impl AsRef<str>) {
    let _ = writeln!(std::io::stderr(), "{}", text.as_ref());
}
