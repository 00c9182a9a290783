//! Latency histograms (HDR, microsecond resolution) and their JSON summary.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest latency recorded: one hour, in microseconds.
const MAX_US: u64 = 3_600_000_000;

/// An HDR histogram of durations in microseconds, 3 significant digits.
#[derive(Clone)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    pub fn new() -> Self {
        // Constant, valid bounds: this cannot fail.
        let hist = Histogram::new_with_bounds(1, MAX_US, 3).expect("constant histogram bounds");
        Self { hist }
    }

    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, MAX_US);
        self.hist.saturating_record(us);
    }

    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    #[cfg(test)]
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    pub fn summary(&self) -> LatencySummary {
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        let mut cdf = Vec::new();
        let mut last = None;
        for v in self.hist.iter_quantiles(4) {
            let value = ms(v.value_iterated_to());
            let q = v.quantile_iterated_to();
            if last != Some(value) {
                cdf.push([value, q]);
                last = Some(value);
            } else if let Some(p) = cdf.last_mut() {
                p[1] = q;
            }
        }
        LatencySummary {
            count: self.hist.len(),
            mean_ms: self.hist.mean() / 1000.0,
            p50_ms: ms(self.hist.value_at_quantile(0.50)),
            p90_ms: ms(self.hist.value_at_quantile(0.90)),
            p99_ms: ms(self.hist.value_at_quantile(0.99)),
            max_ms: ms(self.hist.max()),
            cdf,
        }
    }
}

/// What a histogram says, in milliseconds; `cdf` is `[latency_ms, fraction]`
/// points for the plots.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub cdf: Vec<[f64; 2]>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_quantiles() {
        let mut l = Latency::new();
        for i in 1..=100u64 {
            l.record(Duration::from_millis(i));
        }
        let s = l.summary();
        assert_eq!(s.count, 100);
        assert!((s.p50_ms - 50.0).abs() < 0.1, "{}", s.p50_ms);
        assert!((s.p99_ms - 99.0).abs() < 0.1, "{}", s.p99_ms);
        assert!((s.max_ms - 100.0).abs() < 0.1);
        assert!(s.cdf.last().is_some_and(|p| p[1] >= 0.999));
        assert!(s.cdf.windows(2).all(|w| w[0][0] < w[1][0]));
    }

    #[test]
    fn empty_summary() {
        assert_eq!(Latency::new().summary().count, 0);
    }
}
