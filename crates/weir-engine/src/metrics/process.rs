//! Process metrics under the names every Prometheus client library uses
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`,
//! `process_start_time_seconds`, `process_threads`), read from `/proc/self` when `/metrics`
//! is scraped. Linux only (elsewhere the series are absent); no dependency, no unsafe:
//! `/proc`'s clock ticks are `USER_HZ`, 100 on every Linux architecture Weir builds for.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// `USER_HZ`: the unit of `/proc/self/stat`'s times.
const TICKS_PER_SECOND: f64 = 100.0;

/// The process metrics, registered once, refreshed at each scrape.
#[derive(Debug, Default)]
pub(crate) struct ProcessMetrics {
    cpu: Counter<f64, AtomicU64>,
    cpu_seen: std::sync::Mutex<f64>,
    resident: Gauge,
    virtual_memory: Gauge,
    open_fds: Gauge,
    max_fds: Gauge,
    start_time: Gauge<f64, AtomicU64>,
    threads: Gauge,
}

impl ProcessMetrics {
    /// Registers the metrics (on Linux; elsewhere nothing).
    pub(crate) fn register(registry: &mut Registry) -> ProcessMetrics {
        let metrics = ProcessMetrics::default();
        if !cfg!(target_os = "linux") {
            return metrics;
        }
        registry.register(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            metrics.cpu.clone(),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            metrics.resident.clone(),
        );
        registry.register(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            metrics.virtual_memory.clone(),
        );
        registry.register(
            "process_open_fds",
            "Open file descriptors",
            metrics.open_fds.clone(),
        );
        registry.register(
            "process_max_fds",
            "The most file descriptors the process may open",
            metrics.max_fds.clone(),
        );
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch, in seconds",
            metrics.start_time.clone(),
        );
        registry.register(
            "process_threads",
            "Threads of the process",
            metrics.threads.clone(),
        );
        metrics
    }

    /// Reads `/proc/self` again. What cannot be read keeps its last value.
    pub(crate) fn refresh(&self) {
        if !cfg!(target_os = "linux") {
            return;
        }
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            let boot = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|s| field_after(&s, "btime"));
            if let Some(parsed) = Stat::parse(&stat) {
                let cpu = (parsed.utime + parsed.stime) / TICKS_PER_SECOND;
                let mut seen = self
                    .cpu_seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if cpu > *seen {
                    self.cpu.inc_by(cpu - *seen);
                    *seen = cpu;
                }
                if let Some(boot) = boot {
                    self.start_time
                        .set(boot + parsed.start_ticks / TICKS_PER_SECOND);
                }
            }
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            let kib = |name| field_after(&status, name).map(|k| whole(k * 1024.0));
            if let Some(rss) = kib("VmRSS:") {
                self.resident.set(rss);
            }
            if let Some(size) = kib("VmSize:") {
                self.virtual_memory.set(size);
            }
            if let Some(threads) = field_after(&status, "Threads:") {
                self.threads.set(whole(threads));
            }
        }
        if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
            let open = entries.count();
            self.open_fds.set(i64::try_from(open).unwrap_or(i64::MAX));
        }
        if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
            let max = limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|soft| soft.parse::<i64>().ok());
            if let Some(max) = max {
                self.max_fds.set(max);
            }
        }
    }
}

/// A count read as a float, as an integer (the values of `/proc` are far below 2^53).
#[allow(clippy::cast_possible_truncation)]
fn whole(x: f64) -> i64 {
    x.round() as i64
}

/// The number after `name` on the line that starts with it.
fn field_after(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The fields of `/proc/self/stat` used here, in clock ticks.
struct Stat {
    utime: f64,
    stime: f64,
    start_ticks: f64,
}

impl Stat {
    /// Fields 14, 15 and 22 (1-based), counted after the command name's closing `)`.
    fn parse(stat: &str) -> Option<Stat> {
        let (_, rest) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (the state).
        let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
        Some(Stat {
            utime: field(14)?,
            stime: field(15)?,
            start_ticks: field(22)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_line_is_read_past_a_command_name_with_spaces() {
        let line = "42 (weir (serve) x) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 12345 1000 200";
        let stat = Stat::parse(line).unwrap();
        assert_eq!(
            (stat.utime, stat.stime, stat.start_ticks),
            (250.0, 50.0, 12345.0)
        );
        assert_eq!(field_after("a 1\nbtime 1700000000\n", "btime"), Some(1.7e9));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_measured() {
        let mut registry = Registry::default();
        let metrics = ProcessMetrics::register(&mut registry);
        metrics.refresh();
        assert!(metrics.resident.get() > 0);
        assert!(metrics.open_fds.get() > 0);
        assert!(metrics.max_fds.get() >= metrics.open_fds.get());
        assert!(metrics.threads.get() >= 1);
        assert!(metrics.start_time.get() > 1.5e9);
    }
}
