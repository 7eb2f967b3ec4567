//! Durations as upstream's Go configs write them (`time.ParseDuration`: `5s`, `500ms`,
//! `1m30s`, `1h`; a bare number is seconds here), always parsed within a range, so no config
//! value becomes an absurd timer or overflows. One parser for every provider's config keys.

use std::time::Duration;

/// The length of a Go duration (`time.ParseDuration`'s grammar: terms of a decimal number and
/// a unit, `ns`, `us`/`µs`/`μs`, `ms`, `s`, `m`, `h`, as in `1h30m`, `1.5s`, `300ms`) in seconds,
/// of any size (infinite for a number too long for `f64`: callers check their range); `None`
/// when `s` is not one (empty, a sign, a bare number, a term without digits or unit, an
/// unknown unit). Flags (`hypercloud_options::GoDuration`) and config keys ([`parse_in`])
/// share this grammar and differ only in what they add around it.
pub fn go_seconds(s: &str) -> Option<f64> {
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        if num_len == 0 {
            return None;
        }
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    Some(total)
}

/// A config key's duration within `min..=max`: a Go duration ([`go_seconds`]), or a bare
/// number of seconds (as several providers' configs took them); the error gives the range.
/// The length is checked in `f64` seconds before it becomes a `Duration`, so no value can
/// overflow.
pub fn parse_in(v: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let v = v.trim();
    let bad = || format!("{v:?} is not a duration like 5s or 500ms");
    let range = || format!("{v:?} is out of range ({} to {})", short(min), short(max));
    let total = if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Bare seconds; too many digits for u64 are still a number, just out of range.
        v.parse::<f64>().map_err(|_| bad())?
    } else {
        go_seconds(v).ok_or_else(bad)?
    };
    if total.is_nan() || total > max.as_secs_f64() {
        return Err(range());
    }
    let d = Duration::try_from_secs_f64(total).map_err(|_| range())?;
    if d < min {
        return Err(range());
    }
    Ok(d)
}

/// `24h`, `90s`, `1ms`: for range messages.
pub fn short(d: Duration) -> String {
    match (d.as_secs(), d.subsec_millis()) {
        (0, 0) => "0s".into(),
        (0, ms) => format!("{ms}ms"),
        (s, 0) if s % 3600 == 0 => format!("{}h", s / 3600),
        (s, 0) => format!("{s}s"),
        (s, ms) => format!("{s}.{ms:03}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_within_their_range() {
        let max = Duration::from_secs(3600);
        assert_eq!(
            parse_in("1m30s", Duration::ZERO, max),
            Ok(Duration::from_secs(90))
        );
        assert_eq!(
            parse_in("500ms", Duration::ZERO, max),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(
            parse_in("10", Duration::ZERO, max),
            Ok(Duration::from_secs(10))
        );
        assert_eq!(parse_in("1h", Duration::ZERO, max), Ok(max));
        let e = parse_in("2h", Duration::ZERO, max).expect_err("over the range");
        assert_eq!(e, "\"2h\" is out of range (0s to 1h)");
        assert_eq!(go_seconds("1h30m"), Some(5400.0));
        assert_eq!(go_seconds("2us"), Some(2e-6));
        for bad in ["", "10", "s", "10x", "-5s", ".s5", "1..5s"] {
            assert_eq!(go_seconds(bad), None, "{bad}");
        }
        assert!(parse_in("5 parsecs", Duration::ZERO, max).is_err());
        assert!(parse_in("", Duration::ZERO, max).is_err());
        assert!(parse_in("99999999999999999999999h", Duration::ZERO, max).is_err());
        assert!(parse_in("0s", Duration::from_millis(1), max).is_err());
    }
}
