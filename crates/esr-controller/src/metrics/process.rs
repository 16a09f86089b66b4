//! The standard `process_*` metrics of Prometheus client libraries, read from `/proc` (through
//! `procfs`) at each scrape: `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_virtual_memory_bytes`, `process_virtual_memory_max_bytes`, `process_open_fds`,
//! `process_max_fds`, `process_start_time_seconds` and `process_threads`.
//!
//! On a system without `/proc` (not Linux) the families are absent; a value that cannot be read
//! at a scrape is left out of that scrape.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// One reading of the process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// User + system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size, bytes.
    pub resident_bytes: Option<f64>,
    /// Virtual memory size, bytes.
    pub virtual_bytes: Option<f64>,
    /// Address-space limit (`RLIMIT_AS`), bytes; -1 when unlimited (as client_golang).
    pub virtual_max_bytes: Option<f64>,
    /// Open file descriptors.
    pub open_fds: Option<f64>,
    /// Soft limit of open file descriptors (`RLIMIT_NOFILE`); -1 when unlimited.
    pub max_fds: Option<f64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time: Option<f64>,
    /// OS threads.
    pub threads: Option<f64>,
}

#[cfg(target_os = "linux")]
fn limit(v: &procfs::process::LimitValue) -> f64 {
    match v {
        procfs::process::LimitValue::Unlimited => -1.0,
        procfs::process::LimitValue::Value(n) => *n as f64,
    }
}

impl Reading {
    /// Reads this process.
    #[cfg(target_os = "linux")]
    pub fn current() -> Self {
        use procfs::CurrentSI;
        let Ok(me) = procfs::process::Process::myself() else {
            return Reading::default();
        };
        let tps = procfs::ticks_per_second() as f64;
        let page = procfs::page_size() as f64;
        let stat = me.stat().ok();
        let limits = me.limits().ok();
        let boot = procfs::KernelStats::current().ok().map(|k| k.btime as f64);
        Reading {
            cpu_seconds: stat.as_ref().map(|s| (s.utime + s.stime) as f64 / tps),
            resident_bytes: stat.as_ref().map(|s| s.rss as f64 * page),
            virtual_bytes: stat.as_ref().map(|s| s.vsize as f64),
            virtual_max_bytes: limits
                .as_ref()
                .map(|l| limit(&l.max_address_space.soft_limit)),
            open_fds: me.fd_count().ok().map(|n| n as f64),
            max_fds: limits.as_ref().map(|l| limit(&l.max_open_files.soft_limit)),
            start_time: stat
                .as_ref()
                .zip(boot)
                .map(|(s, b)| b + s.starttime as f64 / tps),
            threads: stat.as_ref().map(|s| s.num_threads as f64),
        }
    }

    /// Reads this process (nothing outside Linux).
    #[cfg(not(target_os = "linux"))]
    pub fn current() -> Self {
        Reading::default()
    }
}

/// The collector, registered once in the metrics registry.
#[derive(Debug, Default)]
pub struct ProcessCollector;

fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    v: Option<f64>,
) -> Result<(), std::fmt::Error> {
    if let Some(v) = v {
        let e = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        ConstGauge::new(v).encode(e)?;
    }
    Ok(())
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let r = Reading::current();
        if let Some(cpu) = r.cpu_seconds {
            let e = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(cpu).encode(e)?;
        }
        let e = &mut encoder;
        gauge(
            e,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            r.resident_bytes,
        )?;
        gauge(
            e,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            r.virtual_bytes,
        )?;
        gauge(
            e,
            "process_virtual_memory_max_bytes",
            "Maximum amount of virtual memory available in bytes.",
            r.virtual_max_bytes,
        )?;
        gauge(
            e,
            "process_open_fds",
            "Number of open file descriptors.",
            r.open_fds,
        )?;
        gauge(
            e,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            r.max_fds,
        )?;
        gauge(
            e,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            r.start_time,
        )?;
        gauge(
            e,
            "process_threads",
            "Number of OS threads in the process.",
            r.threads,
        )?;
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let r = Reading::current();
        assert!(r.resident_bytes.unwrap() > 0.0);
        assert!(r.virtual_bytes.unwrap() >= r.resident_bytes.unwrap());
        // stdin, stdout, stderr at least.
        assert!(r.open_fds.unwrap() >= 3.0);
        assert!(r.max_fds.unwrap() >= r.open_fds.unwrap() || r.max_fds == Some(-1.0));
        assert!(r.threads.unwrap() >= 1.0);
        assert!(r.cpu_seconds.unwrap() >= 0.0);
        // Seconds since the epoch (after 2020-01-01), not since boot.
        let start = r.start_time.unwrap();
        assert!(start > 1_577_836_800.0, "{start}");
    }
}
