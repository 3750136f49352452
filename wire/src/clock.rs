//! Wall-clock times as capfleet writes them: UTC calendar dates from Unix time, and
//! RFC 3339 timestamps (`2026-11-30T12:15:00.250Z`) for artifacts and records.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
pub fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis()
        .try_into()
        .unwrap_or(u64::MAX)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for a Unix time in milliseconds.
pub fn rfc3339_ms(ms: u64) -> String {
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// [`rfc3339_ms`] for a time in whole seconds (a git commit time).
pub fn rfc3339_secs(secs: i64) -> String {
    let secs = u64::try_from(secs).unwrap_or(0);
    let s = rfc3339_ms(secs.saturating_mul(1000));
    // Whole seconds: drop the `.000`.
    format!("{}Z", &s[..s.len() - 5])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_796_040_900_250), "2026-11-30T12:15:00.250Z");
        // 2024-02-29 (a leap day), 23:59:59.
        assert_eq!(rfc3339_secs(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }
}
