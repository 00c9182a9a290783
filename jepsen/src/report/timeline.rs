//! `timeline.html`: every operation as a bar on its process's row.
//!
//! Self-contained (inline CSS, no scripts, no fetches), so it opens from a
//! CI artifact or an email attachment. Hovering a bar shows the op (its
//! `title`); ops a checker blamed are outlined; fault intervals are shaded
//! behind all rows. The checker verdicts sit on top, the plots below.

use super::results::RunResults;
use crate::history::{Operation, Outcome, Process};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

const ROW_H: u64 = 18;
const LABEL_W: u64 = 90;

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `want` ticks.
pub fn nice_step(span: f64, want: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / want;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm < 1.5 {
        1.0
    } else if norm < 3.5 {
        2.0
    } else if norm < 7.5 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Renders the page. `plots` are image file names to show under the
/// timeline (relative to the page).
pub fn render(results: &RunResults, ops: &[Operation], end_time: u64, plots: &[&str]) -> String {
    let mut h = String::with_capacity(256 + ops.len() * 200);
    h.push_str(HEAD);
    header(&mut h, results);
    timeline(&mut h, results, ops, end_time);
    for p in plots {
        let _ = writeln!(
            h,
            "<p><img src=\"{}\" alt=\"{}\"></p>",
            escape(p),
            escape(p)
        );
    }
    h.push_str("</body></html>\n");
    h
}

fn header(h: &mut String, r: &RunResults) {
    let _ = writeln!(
        h,
        "<h1>raftlock jepsen run: <span class=\"v-{}\">{}</span></h1>",
        r.verdict, r.verdict
    );
    let _ = writeln!(
        h,
        "<p>{} events, {} operations over {:.3} s, {} fault(s).</p>",
        r.events,
        r.operations,
        r.duration_ms / 1e3,
        r.faults.len()
    );
    h.push_str("<table><tr><th>checker</th><th>verdict</th><th>summary</th></tr>\n");
    for c in &r.checkers {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"v-{}\">{}</td><td>{}</td></tr>",
            escape(&c.checker),
            c.verdict,
            c.verdict,
            escape(&c.summary)
        );
        if let Some(e) = &c.explanation {
            let _ = writeln!(
                h,
                "<tr><td></td><td colspan=\"2\"><pre>{}</pre></td></tr>",
                escape(e)
            );
        }
    }
    h.push_str("</table>\n<table><tr><th>f</th><th>ok</th><th>fail</th><th>info</th></tr>\n");
    for (f, c) in &r.counts {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(f),
            c.ok,
            c.fail,
            c.info
        );
    }
    h.push_str("</table>\n");
    h.push_str(
        "<p class=\"legend\"><span class=\"op ok\">ok</span> <span class=\"op fail\">fail</span> \
         <span class=\"op info\">info</span> <span class=\"op ok bad\">blamed by a checker</span> \
         <span class=\"fault-key\">fault active</span></p>\n",
    );
}

fn timeline(h: &mut String, r: &RunResults, ops: &[Operation], end_time: u64) {
    let mut rows: BTreeMap<Process, Vec<&Operation>> = BTreeMap::new();
    for op in ops {
        rows.entry(op.process).or_default().push(op);
    }
    let busiest = rows.values().map(Vec::len).max().unwrap_or(0) as u64;
    let width = (busiest * 10).clamp(1000, 30_000);
    let end = end_time.max(1);
    let x = |t: u64| LABEL_W as f64 + t as f64 * width as f64 / end as f64;
    let height = rows.len() as u64 * ROW_H + 24;
    let blamed: HashSet<u64> = r
        .checkers
        .iter()
        .flat_map(|c| c.highlight.iter().copied())
        .collect();

    let _ = writeln!(
        h,
        "<div class=\"tl\" style=\"width:{}px;height:{}px\">",
        LABEL_W + width + 20,
        height
    );
    for f in &r.faults {
        let (a, b) = (x(f.start), x(f.end.unwrap_or(end)));
        let _ = writeln!(
            h,
            "<div class=\"fault\" style=\"left:{a:.1}px;width:{:.1}px;height:{height}px\" title=\"{}\"><span>{}</span></div>",
            (b - a).max(1.0),
            escape(&f.name),
            escape(&f.name)
        );
    }
    let step_ms = nice_step(end as f64 / 1e6, 10.0);
    let mut t_ms = 0.0;
    while t_ms * 1e6 <= end as f64 {
        let _ = writeln!(
            h,
            "<div class=\"tick\" style=\"left:{:.1}px;height:{height}px\">{}</div>",
            x((t_ms * 1e6) as u64),
            fmt_ms(t_ms)
        );
        t_ms += step_ms;
    }
    for (row, (process, ops)) in rows.iter().enumerate() {
        let top = 20 + row as u64 * ROW_H;
        let _ = writeln!(
            h,
            "<div class=\"label\" style=\"top:{top}px\">process {process}</div>"
        );
        for op in ops {
            let stop = op.completed_at.unwrap_or(end);
            let (a, b) = (x(op.call), x(stop));
            let class = match op.outcome {
                Outcome::Ok => "ok",
                Outcome::Fail => "fail",
                Outcome::Info => "info",
            };
            let bad = if blamed.contains(&op.index) {
                " bad"
            } else {
                ""
            };
            let mut title = op.to_string();
            if let Some(e) = &op.error {
                let _ = write!(title, " error={e}");
            }
            let _ = writeln!(
                h,
                "<div class=\"op {class}{bad}\" style=\"left:{a:.1}px;top:{top}px;width:{:.1}px\" title=\"{}\">{}</div>",
                (b - a).max(2.0),
                escape(&title),
                escape(op.f.as_str())
            );
        }
    }
    h.push_str("</div>\n");
}

fn fmt_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.3}s", ms / 1e3)
    } else {
        format!("{ms:.1}ms")
    }
}

const HEAD: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>raftlock jepsen run</title>
<style>
body { font-family: sans-serif; font-size: 13px; margin: 16px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top; }
pre { margin: 0; white-space: pre-wrap; font-size: 12px; }
.v-valid { color: #15803d; font-weight: bold; }
.v-INVALID { color: #b91c1c; font-weight: bold; }
.v-unknown { color: #a16207; font-weight: bold; }
.tl { position: relative; overflow: visible; border-top: 1px solid #999; margin-top: 12px; }
.label { position: absolute; left: 0; width: 86px; height: 16px; font-size: 11px; }
.tick { position: absolute; top: 0; border-left: 1px dotted #bbb; font-size: 10px; color: #666; padding-left: 2px; }
.fault { position: absolute; top: 0; background: rgba(239, 68, 68, 0.13); font-size: 10px; color: #991b1b; overflow: hidden; white-space: nowrap; }
.fault span { position: absolute; bottom: 0; left: 2px; }
.op { position: absolute; height: 14px; font-size: 10px; line-height: 14px; overflow: hidden; white-space: nowrap; border-radius: 2px; box-sizing: border-box; }
.legend .op { position: static; display: inline-block; padding: 0 6px; }
.op:hover { outline: 2px solid #111; z-index: 2; }
.ok { background: #86efac; }
.fail { background: #fca5a5; }
.info { background: #fde68a; }
.bad { outline: 2px solid #dc2626; z-index: 1; }
.fault-key { background: rgba(239, 68, 68, 0.13); padding: 0 6px; }
</style></head><body>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(100.0, 10.0), 10.0);
        assert_eq!(nice_step(230.0, 10.0), 20.0);
        assert_eq!(nice_step(0.0, 10.0), 1.0);
    }
}
