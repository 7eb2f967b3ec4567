//! Go-style durations for flags (`10s`, `5m0s`, `1h30m`, `300ms`), as upstream
//! `time.ParseDuration`, so flag values copied from Kubernetes manifests keep working.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The longest duration a flag takes: Go's (`time.Duration` is an int64 of nanoseconds, so
/// `time.ParseDuration` refuses anything longer).
pub const MAX_DURATION: Duration = Duration::new(9_223_372_036, 854_775_807);

/// A duration written the Go way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    /// The `std` duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl From<GoDuration> for Duration {
    fn from(d: GoDuration) -> Self {
        d.0
    }
}

impl FromStr for GoDuration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("invalid duration {s:?} (use e.g. 300ms, 10s, 5m0s, 1h30m)");
        if s == "0" {
            return Ok(Self(Duration::ZERO));
        }
        if s.starts_with('-') {
            return Err(format!("negative duration {s:?} is not allowed"));
        }
        let rest = s.strip_prefix('+').unwrap_or(s);
        let total = hypercloud_cloudprovider::duration::go_seconds(rest).ok_or_else(bad)?;
        // An infinite sum (a number too long for f64) is out of range too.
        if total.is_nan() || total > MAX_DURATION.as_secs_f64() {
            return Err(format!(
                "duration {s:?} is out of range (0s to {}, as Go's)",
                GoDuration(MAX_DURATION)
            ));
        }
        Duration::try_from_secs_f64(total)
            .map(|d| Self(d.min(MAX_DURATION)))
            .map_err(|_| bad())
    }
}

impl fmt::Display for GoDuration {
    /// Formats as Go does (`1h30m0s`, `5m0s`, `10s`, `300ms`, `0s`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_zero() {
            return f.write_str("0s");
        }
        if d < Duration::from_secs(1) {
            let nanos = d.subsec_nanos();
            return if nanos.is_multiple_of(1_000_000) {
                write!(f, "{}ms", nanos / 1_000_000)
            } else if nanos.is_multiple_of(1_000) {
                write!(f, "{}µs", nanos / 1_000)
            } else {
                write!(f, "{nanos}ns")
            };
        }
        let secs = d.as_secs();
        let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
        let frac = d.subsec_nanos();
        if h > 0 {
            write!(f, "{h}h{m}m")?;
        } else if m > 0 {
            write!(f, "{m}m")?;
        }
        if frac == 0 {
            write!(f, "{s}s")
        } else {
            let frac = format!("{frac:09}");
            write!(f, "{s}.{}s", frac.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Duration {
        s.parse::<GoDuration>().expect(s).0
    }

    #[test]
    fn parses_go_durations() {
        assert_eq!(p("10s"), Duration::from_secs(10));
        assert_eq!(p("5m0s"), Duration::from_secs(300));
        assert_eq!(p("1h30m"), Duration::from_secs(5400));
        assert_eq!(p("300ms"), Duration::from_millis(300));
        assert_eq!(p("1.5s"), Duration::from_millis(1500));
        assert_eq!(p("12h0m0s"), Duration::from_secs(43200));
        assert_eq!(p("0"), Duration::ZERO);
        assert_eq!(p("2us"), Duration::from_micros(2));
    }

    #[test]
    fn rejects_bad_durations_with_the_value_in_the_message() {
        for bad in ["", "10", "s", "10x", "-5s", "1h-5m", "ms10", "1..5s"] {
            let err = bad.parse::<GoDuration>().expect_err(bad);
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn durations_beyond_go_s_range_are_refused_with_the_range() {
        let max = GoDuration(MAX_DURATION).to_string();
        assert_eq!(max, "2562047h47m16.854775807s");
        assert!(p(&max) <= MAX_DURATION);
        for huge in [
            "2562048h",
            "99999999999999999999999999h",
            &"9".repeat(400).to_string(),
            "1e30s",
        ] {
            let err = huge.parse::<GoDuration>().expect_err(huge);
            assert!(
                err.contains("out of range") || err.contains("invalid duration"),
                "{huge}: {err}"
            );
        }
        let err = "2562048h".parse::<GoDuration>().expect_err("huge");
        assert!(err.contains("2562047h47m16.854775807s"), "{err}");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            /// Any text: a duration within Go's range or an error naming the value.
            #[test]
            fn any_text_parses_or_is_refused(s in "[-+]?[0-9.]{0,30}(ns|us|ms|s|m|h|x)?([0-9.]{0,25}(ms|s|m|h))?") {
                match s.parse::<GoDuration>() {
                    Ok(d) => prop_assert!(d.get() <= MAX_DURATION),
                    Err(e) => prop_assert!(e.contains(&format!("{s:?}")), "{e}"),
                }
            }

            /// Numbers of any size with any unit.
            #[test]
            fn any_number_with_any_unit(n in any::<f64>(), unit in prop::sample::select(&["ns", "us", "ms", "s", "m", "h"][..])) {
                let s = format!("{}{unit}", n.abs());
                if let Ok(d) = s.parse::<GoDuration>() {
                    prop_assert!(d.get() <= MAX_DURATION);
                    // And it prints back as something that parses.
                    prop_assert!(d.to_string().parse::<GoDuration>().is_ok());
                }
            }
        }
    }

    #[test]
    fn formats_like_go() {
        for (s, want) in [
            ("10s", "10s"),
            ("5m", "5m0s"),
            ("1h30m", "1h30m0s"),
            ("300ms", "300ms"),
            ("0s", "0s"),
            ("1.5s", "1.5s"),
            ("2m3s", "2m3s"),
        ] {
            assert_eq!(s.parse::<GoDuration>().expect(s).to_string(), want);
        }
    }
}
