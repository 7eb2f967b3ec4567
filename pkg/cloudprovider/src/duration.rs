//! Durations as upstream's Go configs write them (`time.ParseDuration`: `5s`, `500ms`,
//! `1m30s`, `1h`; a bare number is seconds here), always parsed within a range, so no config
//! value becomes an absurd timer or overflows. One parser for every provider's config keys.

use std::time::Duration;

/// A Go-style duration within `min..=max`; the error gives the range. The sum is kept in
/// `f64` seconds and checked before it becomes a `Duration`, so no value can overflow.
pub fn parse_in(v: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let v = v.trim();
    let bad = || format!("{v:?} is not a duration like 5s or 500ms");
    let range = || format!("{v:?} is out of range ({} to {})", short(min), short(max));
    let total = if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Bare seconds; too many digits for u64 are still a number, just out of range.
        v.parse::<f64>().map_err(|_| bad())?
    } else {
        let mut total = 0f64;
        let mut rest = v;
        if rest.is_empty() {
            return Err(bad());
        }
        while !rest.is_empty() {
            let num_end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(bad)?;
            let n: f64 = rest[..num_end].parse().map_err(|_| bad())?;
            rest = &rest[num_end..];
            let unit_end = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let scale = match &rest[..unit_end] {
                "ms" => 0.001,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return Err(bad()),
            };
            rest = &rest[unit_end..];
            total += n * scale;
        }
        total
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
        assert_eq!(e, "\"2h\" is out of range (0ms to 1h)");
        assert!(parse_in("5 parsecs", Duration::ZERO, max).is_err());
        assert!(parse_in("", Duration::ZERO, max).is_err());
        assert!(parse_in("99999999999999999999999h", Duration::ZERO, max).is_err());
        assert!(parse_in("0s", Duration::from_millis(1), max).is_err());
    }
}
