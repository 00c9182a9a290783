//! Process metrics for `/metrics`, read from `/proc/self` at scrape time
//! (Linux; elsewhere they are left out): resident memory, open file
//! descriptors against their limit, CPU time, threads. The names are the
//! Prometheus client libraries' standard `process_*` ones, so existing
//! dashboards and alerts apply.

use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Clock ticks per second of `/proc/[pid]/stat`'s CPU times: the kernel
/// exports them in USER_HZ, which is 100 on every Linux architecture.
const USER_HZ: f64 = 100.0;

/// Registers the process metrics, read now, as constants in `registry`
/// (one built per scrape). `prometheus-client` appends `.` to each help
/// and `_total` to the counter.
pub(crate) fn register(registry: &mut Registry) {
    if let Some(rss) = status_kib("VmRSS:") {
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            ConstGauge::new(rss * 1024),
        );
    }
    if let Some(vm) = status_kib("VmSize:") {
        registry.register(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            ConstGauge::new(vm * 1024),
        );
    }
    if let Some(threads) = status_kib("Threads:") {
        registry.register(
            "process_threads",
            "OS threads of the process",
            ConstGauge::new(threads),
        );
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        registry.register(
            "process_open_fds",
            "Open file descriptors",
            ConstGauge::new(fds.count()),
        );
    }
    if let Some(max) = max_open_files() {
        registry.register(
            "process_max_fds",
            "Limit on open file descriptors",
            ConstGauge::new(max),
        );
    }
    if let Some(cpu) = cpu_seconds() {
        registry.register(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            ConstCounter::new(cpu),
        );
    }
}

/// A number field of `/proc/self/status` (`VmRSS:   1234 kB` → 1234).
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// The soft limit on open files (`Max open files  1024  4096  files`).
fn max_open_files() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// utime + stime of `/proc/self/stat`, in seconds. The fields are counted
/// after the command name's closing `)`, which may itself contain spaces.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    // After `)`: state is field 3; utime and stime are fields 14 and 15.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let mut registry = Registry::default();
        register(&mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode_registry(&mut out, &registry).expect("encode");
        for name in [
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_cpu_seconds_total",
            "process_threads",
        ] {
            let value: f64 = out
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} missing: {out}"))
                .parse()
                .expect("a number");
            assert!(value >= 0.0, "{name}");
        }
        let fds = out
            .lines()
            .find_map(|l| l.strip_prefix("process_open_fds "))
            .expect("fds");
        assert!(
            fds.parse::<u64>().expect("count") >= 3,
            "stdin, stdout, stderr at least"
        );
    }
}
