//! Latency and throughput plots as PNG, drawn with `plotters`.
//!
//! Text needs a font. plotters' default `ttf` feature looks fonts up with
//! the system's fontconfig, which fresh machines lack; we use its
//! `ab_glyph` feature instead and register DejaVu Sans, embedded from the
//! `dejavu` crate. So the plots build and render anywhere cargo does.

use crate::history::{Fault, Operation, Outcome};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

/// Plot size in pixels.
const SIZE: (u32, u32) = (1200, 600);
/// Fault shading.
const FAULT: RGBColor = RGBColor(254, 202, 202);

/// Registers the embedded font under the names plotters asks for. Done
/// once; the result is remembered so a failure is reported every time.
fn fonts() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        for name in ["sans-serif", "serif", "monospace"] {
            plotters::style::register_font(name, FontStyle::Normal, dejavu::sans::regular())
                .map_err(|_| "embedded DejaVu Sans font is unreadable".to_string())?;
        }
        Ok(())
    })
    .clone()
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A distinct color per function name, stable across plots.
fn color_of(index: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(37, 99, 235),
        RGBColor(22, 163, 74),
        RGBColor(234, 88, 12),
        RGBColor(147, 51, 234),
        RGBColor(219, 39, 119),
        RGBColor(8, 145, 178),
        RGBColor(101, 163, 13),
        RGBColor(100, 116, 139),
    ];
    COLORS[index % COLORS.len()]
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "ok",
        Outcome::Fail => "fail",
        Outcome::Info => "info",
    }
}

/// Seconds since run start.
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Shades each fault interval over the full height, its name at the top.
fn shade_faults<'a, Y>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    faults: &[Fault],
    end: u64,
    y: (f64, f64),
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    chart
        .draw_series(faults.iter().map(|f| {
            Rectangle::new(
                [(secs(f.start), y.0), (secs(f.end.unwrap_or(end)), y.1)],
                FAULT.mix(0.5).filled(),
            )
        }))
        .map_err(err)?;
    let label = ("sans-serif", 13).into_font().color(&RGBColor(153, 27, 27));
    chart
        .draw_series(
            faults
                .iter()
                .map(|f| Text::new(format!(" {}", f.name), (secs(f.start), y.1), label.clone())),
        )
        .map_err(err)?;
    Ok(())
}

/// Writes `latency.png`: one point per completed op at its invocation
/// time, latency in ms on a log axis, color by function, shape by outcome
/// (dot ok, cross fail, triangle info), faults shaded.
pub fn latency(path: &Path, ops: &[Operation], faults: &[Fault], end: u64) -> Result<(), String> {
    fonts()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let points: Vec<(&Operation, f64)> = ops
        .iter()
        .filter_map(|o| o.latency().map(|l| (o, (l as f64 / 1e6).max(0.001))))
        .collect();
    let lo = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let (lo, hi) = if points.is_empty() {
        (0.1, 10.0)
    } else {
        (lo / 1.5, hi * 1.5)
    };
    let x_end = secs(end).max(1e-6);
    let mut chart = ChartBuilder::on(&root)
        .caption("Latency by operation (faults shaded)", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_end, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("latency (ms)")
        .y_label_formatter(&|v| format!("{v}"))
        .draw()
        .map_err(err)?;
    shade_faults(&mut chart, faults, end, (lo, hi))?;

    let mut groups: BTreeMap<(String, &'static str), Vec<(f64, f64)>> = BTreeMap::new();
    for (o, l) in &points {
        groups
            .entry((o.f.to_string(), outcome_name(o.outcome)))
            .or_default()
            .push((secs(o.call), *l));
    }
    let fs: Vec<String> = dedup(groups.keys().map(|k| k.0.clone()));
    for ((f, outcome), pts) in groups {
        let color = color_of(fs.iter().position(|x| *x == f).unwrap_or(0));
        let label = format!("{f} {outcome}");
        // Shape tells the outcome even where colors (functions) overlap.
        match outcome {
            "ok" => {
                chart
                    .draw_series(pts.into_iter().map(|p| Circle::new(p, 2, color.filled())))
                    .map_err(err)?
                    .label(label)
                    .legend(move |p| Circle::new(p, 4, color.filled()));
            }
            "fail" => {
                chart
                    .draw_series(
                        pts.into_iter()
                            .map(|p| Cross::new(p, 3, color.stroke_width(2))),
                    )
                    .map_err(err)?
                    .label(label)
                    .legend(move |p| Cross::new(p, 4, color.stroke_width(2)));
            }
            _ => {
                chart
                    .draw_series(pts.into_iter().map(|p| TriangleMarker::new(p, 4, color)))
                    .map_err(err)?
                    .label(label)
                    .legend(move |p| TriangleMarker::new(p, 5, color));
            }
        }
    }
    legend(&mut chart)?;
    root.present().map_err(err)
}

/// Writes `throughput.png`: completions per second in time buckets, one
/// line per function and outcome, faults shaded.
pub fn throughput(
    path: &Path,
    ops: &[Operation],
    faults: &[Fault],
    end: u64,
) -> Result<(), String> {
    fonts()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    // About 30 completions per bucket on average, between 10 and 100
    // buckets: fewer make faults blur, more make noise.
    let completions = ops.iter().filter(|o| o.completed_at.is_some()).count() as u64;
    let buckets = (completions / 30).clamp(10, 100);
    let width = end.max(1).div_ceil(buckets).max(1);
    let mut rates: BTreeMap<(String, &'static str), Vec<f64>> = BTreeMap::new();
    for o in ops {
        let Some(t) = o.completed_at else { continue };
        let series = rates
            .entry((o.f.to_string(), outcome_name(o.outcome)))
            .or_insert_with(|| vec![0.0; buckets as usize]);
        let slot = ((t / width) as usize).min(buckets as usize - 1);
        series[slot] += 1e9 / width as f64;
    }
    let hi = rates.values().flatten().fold(1.0f64, |a, &b| a.max(b)) * 1.1;
    let x_end = secs(end).max(1e-6);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Throughput (completions per second, faults shaded)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..x_end, 0f64..hi)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc("ops/s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    shade_faults(&mut chart, faults, end, (0.0, hi))?;
    let fs: Vec<String> = dedup(rates.keys().map(|k| k.0.clone()));
    for ((f, outcome), ys) in rates {
        let color = color_of(fs.iter().position(|x| *x == f).unwrap_or(0));
        let stroke = if outcome == "ok" { 2 } else { 1 };
        let style = ShapeStyle::from(&color).stroke_width(stroke);
        let line = ys
            .iter()
            .enumerate()
            .map(move |(i, &y)| (secs(i as u64 * width + width / 2), y));
        chart
            .draw_series(LineSeries::new(line, style))
            .map_err(err)?
            .label(format!("{f} {outcome}"))
            .legend(move |(x, y)| PathElement::new(vec![(x - 8, y), (x + 8, y)], style));
    }
    legend(&mut chart)?;
    root.present().map_err(err)
}

fn legend<'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, Y>>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

fn dedup(it: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = it.collect();
    v.sort();
    v.dedup();
    v
}
