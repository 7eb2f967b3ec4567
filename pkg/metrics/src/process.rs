//! `process_*` metrics read from `/proc/self` at scrape time (upstream: the Prometheus Go
//! client's process collector), so dashboards built for the Go components keep working.
//! Cheap: two small procfs reads per scrape; on systems without `/proc` nothing is reported.

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, Opts};

/// The collector; register it in the component's registry.
pub struct ProcessCollector {
    cpu: Counter,
    rss: Gauge,
    vsize: Gauge,
    max_rss: Gauge,
    start: Gauge,
    threads: Gauge,
    descs: Vec<Desc>,
    ticks: f64,
    page: f64,
}

impl ProcessCollector {
    /// A collector for this process.
    pub fn new() -> crate::Result<Self> {
        let cpu = Counter::with_opts(Opts::new(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
        ))?;
        let rss = Gauge::with_opts(Opts::new(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
        ))?;
        let vsize = Gauge::with_opts(Opts::new(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
        ))?;
        let max_rss = Gauge::with_opts(Opts::new(
            "process_resident_memory_max_bytes",
            "Peak resident memory size in bytes (VmHWM).",
        ))?;
        let start = Gauge::with_opts(Opts::new(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
        ))?;
        let threads = Gauge::with_opts(Opts::new("process_threads", "Number of OS threads."))?;
        let descs = [
            cpu.desc(),
            rss.desc(),
            vsize.desc(),
            max_rss.desc(),
            start.desc(),
            threads.desc(),
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        Ok(Self {
            cpu,
            rss,
            vsize,
            max_rss,
            start,
            threads,
            descs,
            // The kernel's USER_HZ and page size are 100 and 4096 on every Linux we run on.
            ticks: 100.0,
            page: 4096.0,
        })
    }

    fn refresh(&self) -> Option<()> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name, which is in parentheses and may contain spaces.
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] is field 3 (state); utime=14, stime=15, num_threads=20, starttime=22, vsize=23,
        // rss=24 (1-based field numbers).
        let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<f64>().ok());
        let cpu = (num(14)? + num(15)?) / self.ticks;
        self.cpu.reset();
        self.cpu.inc_by(cpu);
        self.threads.set(num(20)?);
        self.vsize.set(num(23)?);
        self.rss.set(num(24)? * self.page);
        if let Some(boot) = boot_time() {
            self.start.set(boot + num(22)? / self.ticks);
        }
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            if let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            {
                self.max_rss.set(kb * 1024.0);
            }
        }
        Some(())
    }
}

fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        if self.refresh().is_none() {
            return Vec::new();
        }
        [
            self.cpu.collect(),
            self.rss.collect(),
            self.vsize.collect(),
            self.max_rss.collect(),
            self.start.collect(),
            self.threads.collect(),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_this_process() {
        let reg = prometheus::Registry::new();
        reg.register(Box::new(ProcessCollector::new().expect("new")))
            .expect("register");
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&reg.gather())
            .expect("encode");
        let rss: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
            .expect("rss line")
            .parse()
            .expect("number");
        assert!(rss > 1_000_000.0, "{text}");
        assert!(
            text.contains("# TYPE process_cpu_seconds_total counter"),
            "{text}"
        );
    }
}
