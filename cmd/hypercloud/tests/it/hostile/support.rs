//! Helpers shared by the hostile tests.

#![allow(dead_code)]

/// The binary under test.
pub use crate::BIN;

/// Peak resident memory (VmHWM) of a running process in KiB, from /proc.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
