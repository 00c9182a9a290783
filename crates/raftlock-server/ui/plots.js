// The dashboard's plots (docs/api.md, "Dashboard"): the last five minutes
// of what the serving member already measures, drawn as inline SVG by this
// script (no library, no other origin: the page's Content-Security-Policy
// allows neither).
//
// Each poll round hands `record` this member's GET /metrics text and the
// members' replication lag the cluster table computed. A sample keeps the
// raw counters; rates and percentiles are differences between samples, so
// a plot is exactly what Prometheus' rate() and histogram_quantile() would
// show over the same window, without Prometheus.
"use strict";

const Plots = (() => {
  const WINDOW_MS = 5 * 60 * 1000; // what the plots span
  const RATE_MS = 5000; // grants per second: over the last 5 s
  const QUANTILE_MS = 10000; // acquire latency percentiles: over the last 10 s
  const SVG = "http://www.w3.org/2000/svg";
  const W = 600; // viewBox units; the SVG scales to its box
  const H = 100;

  const samples = []; // {t, grants, buckets: [[le, cumulative]], waiters, sessions, lag: Map}

  // OpenMetrics text → Map(name → [{labels, value}]). Only what the plots
  // read; comments and unknown lines are skipped.
  function parse(text) {
    const out = new Map();
    for (const line of text.split("\n")) {
      if (!line || line.startsWith("#")) continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = {};
      if (m[2]) {
        for (const l of m[2].slice(1, -1).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
          labels[l[1]] = l[2];
        }
      }
      const value = Number(m[3]);
      if (!out.has(m[1])) out.set(m[1], []);
      out.get(m[1]).push({ labels, value });
    }
    return out;
  }

  const one = (metrics, name) => {
    const series = metrics.get(name);
    return series && series.length ? series[0].value : null;
  };

  // Records one round. `metricsText` is null when /metrics failed (a gap
  // in the counters' plots); `lag` maps member id → lag or null.
  function record(metricsText, lag, now) {
    const sample = { t: now, grants: null, buckets: null, waiters: null, sessions: null, lag };
    if (metricsText !== null) {
      const metrics = parse(metricsText);
      sample.grants = one(metrics, "raftlock_acquire_grants_total");
      const buckets = (metrics.get("raftlock_acquire_wait_seconds_bucket") || [])
        .map((b) => [b.labels.le === "+Inf" ? Infinity : Number(b.labels.le), b.value])
        .sort((a, b) => a[0] - b[0]);
      sample.buckets = buckets.length ? buckets : null;
      sample.waiters = one(metrics, "raftlock_lock_waiters");
      sample.sessions = one(metrics, "raftlock_sessions");
    }
    samples.push(sample);
    while (samples.length && samples[0].t < now - WINDOW_MS) samples.shift();
  }

  // The newest sample at least `ms` older than samples[i], if any.
  function before(i, ms) {
    for (let j = i - 1; j >= 0; j--) if (samples[i].t - samples[j].t >= ms) return samples[j];
    return null;
  }

  // Grants per second over RATE_MS; null where unknown or across a
  // restart of the member (its counter went down).
  function grantRate(i) {
    const now = samples[i];
    const then = before(i, RATE_MS);
    if (!then || now.grants === null || then.grants === null || now.grants < then.grants) return null;
    return (now.grants - then.grants) / ((now.t - then.t) / 1000);
  }

  // The q-quantile of the acquire wait (ms) of the grants in the last
  // QUANTILE_MS, interpolated inside its bucket as Prometheus'
  // histogram_quantile() does; null without grants.
  function quantile(i, q) {
    const now = samples[i];
    const then = before(i, QUANTILE_MS);
    if (!then || !now.buckets || !then.buckets || now.buckets.length !== then.buckets.length) return null;
    const counts = now.buckets.map((b, k) => [b[0], b[1] - then.buckets[k][1]]);
    const total = counts[counts.length - 1][1];
    if (!(total > 0) || counts.some((c) => c[1] < 0)) return null;
    const rank = q * total;
    let lower = 0;
    let below = 0;
    for (const [le, cumulative] of counts) {
      if (cumulative >= rank) {
        if (le === Infinity) return lower * 1000; // above the largest bound
        const inBucket = cumulative - below;
        const fraction = inBucket > 0 ? (rank - below) / inBucket : 1;
        return (lower + (le - lower) * fraction) * 1000;
      }
      lower = le;
      below = cumulative;
    }
    return null;
  }

  // ---- drawing -----------------------------------------------------------

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    return node;
  }

  const format = (v, unit) => {
    if (v === null || v === undefined) return "—";
    const digits = v >= 100 ? 0 : v >= 10 ? 1 : 2;
    const text = v.toFixed(digits);
    // 2.50 → 2.5, 3.00 → 3; never 100 → 1.
    return (digits ? text.replace(/\.?0+$/, "") : text) + (unit ? " " + unit : "");
  };

  // A round-ish top of the y axis at or above `max`.
  function niceTop(max) {
    if (!(max > 0)) return 1;
    const step = Math.pow(10, Math.floor(Math.log10(max)));
    for (const m of [1, 2, 5, 10]) if (m * step >= max) return m * step;
    return 10 * step;
  }

  // Draws `series` ([{name, values: [{t, v}]}]) into the figure `id`; each
  // series' path carries its last value and point count for readers and
  // tests (data-last, data-points).
  function draw(id, series, unit, now) {
    const figure = document.getElementById(id);
    if (!figure) return;
    const values = series.flatMap((s) => s.values.map((p) => p.v)).filter((v) => v !== null);
    const top = niceTop(values.length ? Math.max(...values) : 0);
    const x = (t) => ((t - (now - WINDOW_MS)) / WINDOW_MS) * W;
    const y = (v) => H - (v / top) * (H - 4) - 2;
    const plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "plot-area",
      role: "img", "aria-label": figure.querySelector(".plot-title").textContent });
    for (const f of [0.25, 0.5, 0.75]) {
      plot.append(svg("line", { x1: 0, x2: W, y1: y(top * f), y2: y(top * f), class: "grid" }));
    }
    const legend = [];
    series.forEach((s, k) => {
      let d = "";
      let pen = "M";
      let points = 0;
      for (const p of s.values) {
        if (p.v === null) {
          pen = "M"; // a gap: no line across unknown values
          continue;
        }
        d += `${pen}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)} `;
        pen = "L";
        points += 1;
      }
      const newest = s.values.length ? s.values[s.values.length - 1].v : null;
      const last = newest === null ? "" : String(newest);
      const path = svg("path", { d: d.trim() || "M0,0", class: `line series-${k % 6}`, "data-series": s.name,
        "data-last": last, "data-points": points, "vector-effect": "non-scaling-stroke" });
      if (!points) path.setAttribute("visibility", "hidden");
      plot.append(path);
      legend.push(el("span", { class: `legend series-${k % 6}` }, `${s.name} ${format(newest, unit)}`));
    });
    figure.querySelector(".plot-area").replaceWith(plot);
    figure.querySelector(".plot-top").textContent = format(top, unit);
    figure.querySelector(".plot-legend").replaceChildren(...legend);
  }

  function render(now) {
    const at = (f) => samples.map((s, i) => ({ t: s.t, v: f(s, i) }));
    draw("plot-grants", [{ name: "grants/s", values: at((s, i) => grantRate(i)) }], "/s", now);
    draw("plot-latency", [
      { name: "p50", values: at((s, i) => quantile(i, 0.5)) },
      { name: "p99", values: at((s, i) => quantile(i, 0.99)) },
    ], "ms", now);
    draw("plot-waiters", [{ name: "waiters", values: at((s) => s.waiters) }], "", now);
    draw("plot-sessions", [{ name: "sessions", values: at((s) => s.sessions) }], "", now);
    const members = [...new Set(samples.flatMap((s) => [...s.lag.keys()]))].sort((a, b) => a - b);
    draw("plot-lag", members.map((id) => ({
      name: "member " + id,
      values: at((s) => (s.lag.has(id) ? s.lag.get(id) : null)),
    })), "", now);
  }

  return { record, render, parse, quantile: (i, q) => quantile(i, q), samples };
})();
