//! PNG plots with plotters: latency CDFs (one line per system) and the
//! failover grant-rate timeline. Text is rendered with plotters' `ab_glyph`
//! feature from DejaVu Sans embedded by the `dejavu` crate (as jepsen/
//! does), so no fontconfig is needed.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::anyhow;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::Report;
use crate::stats::LatencySummary;

const SIZE: (u32, u32) = (900, 500);

/// A plot written: its title and file name (in the output directory).
pub struct Plot {
    pub title: String,
    pub file: String,
}

fn fonts() -> anyhow::Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        for name in ["sans-serif", "serif", "monospace"] {
            plotters::style::register_font(name, FontStyle::Normal, dejavu::sans::regular())
                .map_err(|_| "embedded DejaVu Sans font is unreadable".to_string())?;
        }
        Ok(())
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// Fixed colour per system, the same in every plot.
pub fn color_of(system: &str) -> RGBColor {
    match system {
        "raftlock" => RGBColor(37, 99, 235),
        "etcd" => RGBColor(234, 88, 12),
        "etcd-gateway" => RGBColor(250, 170, 110),
        "zookeeper" => RGBColor(22, 163, 74),
        "raftlock-zk" => RGBColor(124, 58, 237),
        _ => RGBColor(100, 116, 139),
    }
}

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("plot: {e}")
}

/// Every plot the report has data for.
pub fn draw_all(report: &Report, out_dir: &Path) -> anyhow::Result<Vec<Plot>> {
    fonts()?;
    std::fs::create_dir_all(out_dir)?;
    let mut plots = Vec::new();
    let mut clients: Vec<usize> = report.params.clients.clone();
    clients.sort_unstable();
    clients.dedup();
    for &c in &clients {
        for (what, pick) in [
            (
                "acquire",
                (|u: &crate::workload::uncontended::Uncontended| &u.acquire) as fn(&_) -> &_,
            ),
            ("release", |u| &u.release),
        ] {
            let series: Vec<(String, &LatencySummary)> = report
                .systems
                .iter()
                .filter_map(|s| {
                    let u = s
                        .uncontended
                        .iter()
                        .find(|u| u.clients == c && !u.pinned && u.run == 0)?;
                    Some((s.system.clone(), pick(u)))
                })
                .collect();
            let file = format!("uncontended-{what}-c{c}.png");
            let title = format!(
                "Uncontended {what} latency, {c} client{}",
                if c == 1 { "" } else { "s" }
            );
            if cdf(&out_dir.join(&file), &title, &series)? {
                plots.push(Plot { title, file });
            }
        }
    }
    let series: Vec<(String, &LatencySummary)> = report
        .systems
        .iter()
        .filter_map(|s| {
            let c = s.contended.iter().find(|c| !c.pinned && c.run == 0)?;
            Some((s.system.clone(), &c.handoff))
        })
        .collect();
    let title = format!(
        "Contended handoff latency ({} clients, one lock)",
        report.params.contended_clients
    );
    if cdf(&out_dir.join("contended-handoff.png"), &title, &series)? {
        plots.push(Plot {
            title,
            file: "contended-handoff.png".into(),
        });
    }
    let title = "Grants per second while the leader is killed (SIGKILL)".to_string();
    if timeline(&out_dir.join("failover-timeline.png"), &title, report)? {
        plots.push(Plot {
            title,
            file: "failover-timeline.png".into(),
        });
    }
    Ok(plots)
}

/// One CDF per system on a log latency axis. False if there is no data.
fn cdf(path: &Path, title: &str, series: &[(String, &LatencySummary)]) -> anyhow::Result<bool> {
    let xs = series.iter().flat_map(|(_, s)| s.cdf.iter().map(|p| p[0]));
    let (lo, hi) = xs
        .filter(|x| *x > 0.0)
        .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    if lo > hi {
        return Ok(false);
    }
    let (lo, hi) = (lo * 0.8, (hi * 1.25).max(lo * 2.0));
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..1f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(8)
        .x_desc("latency, ms (log scale)")
        .y_desc("fraction of operations ≤ x")
        .x_label_formatter(&|v| format_ms(*v))
        .draw()
        .map_err(err)?;
    for (name, s) in series {
        let color = color_of(name);
        let label = format!(
            "{name} (p50 {} ms, p99 {} ms)",
            format_ms(s.p50_ms),
            format_ms(s.p99_ms)
        );
        chart
            .draw_series(LineSeries::new(
                s.cdf.iter().map(|p| (p[0].max(lo), p[1])),
                color.stroke_width(2),
            ))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(true)
}

fn format_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else if v >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn timeline(path: &Path, title: &str, report: &Report) -> anyhow::Result<bool> {
    let series: Vec<_> = report
        .systems
        .iter()
        .filter_map(|s| Some((s.system.clone(), s.failover.as_ref()?)))
        .collect();
    if series.is_empty() {
        return Ok(false);
    }
    let secs = series.iter().map(|(_, f)| f.secs).fold(1.0, f64::max);
    let top = series
        .iter()
        .flat_map(|(_, f)| f.timeline.iter().map(|p| p[1]))
        .fold(1.0, f64::max)
        * 1.1;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..secs, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc("grants per second (250 ms buckets)")
        .draw()
        .map_err(err)?;
    for (name, f) in &series {
        let color = color_of(name);
        let label = format!(
            "{name} (killed at {:.1} s; largest gap {:.2} s)",
            f.kill_at_s, f.largest_gap_s
        );
        chart
            .draw_series(LineSeries::new(
                f.timeline.iter().map(|p| (p[0], p[1])),
                color.stroke_width(2),
            ))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(f.kill_at_s, 0.0), (f.kill_at_s, top)],
                color.mix(0.5).stroke_width(1),
            )))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(true)
}
