//! A listener's own certificate's validity period, read once when the server starts: an
//! expired, not yet valid or soon expiring certificate (within [`SOON`]) is a WARN naming
//! the listener, the file and the date, because rustls serves any certificate it is given
//! and only the clients find out, each with a refused handshake.
//!
//! Only the leaf's `notBefore` and `notAfter` are read, by a short DER walk (Certificate →
//! TBSCertificate → Validity, RFC 5280 §4.1), so no X.509 library is linked for two dates.
//! Not here: the handshake and its refusals (`tls.rs`); a certificate whose dates cannot be
//! read is reported as such, never a reason not to start (rustls accepted it).

use std::path::Path;
use std::time::Duration;

/// A certificate that expires within this is a WARN at start.
pub(crate) const SOON: Duration = Duration::from_secs(14 * 24 * 3600);

/// What is wrong with a certificate's validity at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Problem {
    /// `notAfter` is past.
    Expired {
        /// `notAfter`, Unix seconds.
        not_after_s: i64,
    },
    /// `notBefore` is still to come.
    NotYetValid {
        /// `notBefore`, Unix seconds.
        not_before_s: i64,
    },
    /// `notAfter` is within [`SOON`].
    ExpiresSoon {
        /// `notAfter`, Unix seconds.
        not_after_s: i64,
    },
    /// The dates could not be read from the certificate.
    Unreadable,
}

/// The problem of the DER certificate `der` at `now_s` (Unix seconds), if any.
pub(crate) fn problem(der: &[u8], now_s: i64) -> Option<Problem> {
    let Some((not_before_s, not_after_s)) = validity(der) else {
        return Some(Problem::Unreadable);
    };
    let soon_s = i64::try_from(SOON.as_secs()).unwrap_or(i64::MAX);
    if now_s > not_after_s {
        Some(Problem::Expired { not_after_s })
    } else if now_s < not_before_s {
        Some(Problem::NotYetValid { not_before_s })
    } else if not_after_s.saturating_sub(now_s) < soon_s {
        Some(Problem::ExpiresSoon { not_after_s })
    } else {
        None
    }
}

/// Logs a WARN when the leaf certificate `der` of `listener` (from `file`) has a problem
/// at `now_ns` (Unix nanoseconds, the server's clock).
pub(crate) fn warn_if_bad(der: &[u8], listener: &str, file: &Path, now_ns: u64) {
    let now_s = i64::try_from(now_ns / 1_000_000_000).unwrap_or(i64::MAX);
    let file = file.display();
    match problem(der, now_s) {
        None => {}
        Some(Problem::Expired { not_after_s }) => tracing::warn!(
            listener,
            %file,
            not_after = %utc(not_after_s),
            "the server certificate has expired: clients will refuse TLS handshakes"
        ),
        Some(Problem::NotYetValid { not_before_s }) => tracing::warn!(
            listener,
            %file,
            not_before = %utc(not_before_s),
            "the server certificate is not valid yet: clients will refuse TLS handshakes"
        ),
        Some(Problem::ExpiresSoon { not_after_s }) => tracing::warn!(
            listener,
            %file,
            not_after = %utc(not_after_s),
            days_left = (not_after_s - now_s) / 86_400,
            "the server certificate expires in less than 14 days: renew it"
        ),
        Some(Problem::Unreadable) => tracing::warn!(
            listener,
            %file,
            "cannot read the server certificate's validity period: its expiry is not checked"
        ),
    }
}

/// `(notBefore, notAfter)` in Unix seconds.
fn validity(der: &[u8]) -> Option<(i64, i64)> {
    let (certificate, _) = element(der, 0x30)?;
    let (mut tbs, _) = element(certificate, 0x30)?;
    // version [0] EXPLICIT (absent in v1 certificates)
    if tbs.first() == Some(&0xA0) {
        tbs = element(tbs, 0xA0)?.1;
    }
    let (_, rest) = element(tbs, 0x02)?; // serialNumber
    let (_, rest) = element(rest, 0x30)?; // signature
    let (_, rest) = element(rest, 0x30)?; // issuer
    let (validity, _) = element(rest, 0x30)?;
    let (not_before, rest) = time(validity)?;
    let (not_after, _) = time(rest)?;
    Some((not_before, not_after))
}

/// The content of the DER element at the start of `input` if its tag is `tag`, and what
/// follows it.
fn element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&found, input) = input.split_first()?;
    if found != tag {
        return None;
    }
    let (&first, mut input) = input.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let bytes = usize::from(first & 0x7f);
        if bytes == 0 || bytes > 4 {
            return None;
        }
        let (len, rest) = input.split_at_checked(bytes)?;
        input = rest;
        len.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b))
    };
    input.split_at_checked(len)
}

/// A UTCTime or GeneralizedTime (`...Z`) in Unix seconds, and what follows it.
fn time(input: &[u8]) -> Option<(i64, &[u8])> {
    let (text, rest, century) = match input.first()? {
        0x17 => {
            let (text, rest) = element(input, 0x17)?;
            (text, rest, None)
        }
        0x18 => {
            let (text, rest) = element(input, 0x18)?;
            (text, rest, Some(()))
        }
        _ => return None,
    };
    let digits = text.strip_suffix(b"Z")?;
    let number = |from: usize, len: usize| -> Option<i64> {
        let part = digits.get(from..from.checked_add(len)?)?;
        part.iter().try_fold(0i64, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0'))
        })
    };
    let (year, at) = match century {
        None if digits.len() == 12 => {
            let yy = number(0, 2)?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, 2)
        }
        Some(()) if digits.len() == 14 => (number(0, 4)?, 4),
        _ => return None,
    };
    let (month, day) = (number(at, 2)?, number(at + 2, 2)?);
    let (hour, minute, second) = (number(at + 4, 2)?, number(at + 6, 2)?, number(at + 8, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some((days * 86_400 + hour * 3_600 + minute * 60 + second, rest))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A Unix time as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc(unix_s: i64) -> String {
    let days = unix_s.div_euclid(86_400);
    let secs = unix_s.rem_euclid(86_400);
    // civil_from_days (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3_600,
        secs % 3_600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate valid from `from` to `until` (year, month, day).
    fn certificate(from: (i32, u8, u8), until: (i32, u8, u8)) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
        params.not_after = rcgen::date_time_ymd(until.0, until.1, until.2);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    fn unix(year: i64, month: i64, day: i64) -> i64 {
        days_from_civil(year, month, day) * 86_400
    }

    #[test]
    fn the_dates_are_read_from_utc_and_generalized_times() {
        // rcgen writes UTCTime up to 2049 and GeneralizedTime from 2050 (RFC 5280).
        let der = certificate((2024, 2, 29), (2051, 3, 1));
        assert_eq!(validity(&der), Some((unix(2024, 2, 29), unix(2051, 3, 1))));
        assert_eq!(unix(1970, 1, 1), 0);
        assert_eq!(unix(2000, 3, 1), 951_868_800);
        assert_eq!(utc(951_868_800 + 3_661), "2000-03-01T01:01:01Z");
        assert_eq!(utc(unix(2051, 3, 1)), "2051-03-01T00:00:00Z");
    }

    #[test]
    fn expired_not_yet_valid_and_soon_expiring_certificates_are_problems() {
        let der = certificate((2024, 1, 1), (2025, 1, 1));
        let until = unix(2025, 1, 1);
        assert_eq!(
            problem(&der, until + 1),
            Some(Problem::Expired { not_after_s: until })
        );
        assert_eq!(
            problem(&der, unix(2023, 12, 31)),
            Some(Problem::NotYetValid {
                not_before_s: unix(2024, 1, 1)
            })
        );
        assert_eq!(
            problem(&der, until - 13 * 86_400),
            Some(Problem::ExpiresSoon { not_after_s: until })
        );
        assert_eq!(problem(&der, until - 15 * 86_400), None);
        assert_eq!(problem(&der, unix(2024, 6, 1)), None);
    }

    #[test]
    fn bytes_that_are_no_certificate_are_unreadable_never_a_panic() {
        let der = certificate((2024, 1, 1), (2025, 1, 1));
        for cut in 0..der.len() {
            // Every truncation is either unreadable or still reads the dates (the
            // signature after them is not needed).
            let _ = problem(&der[..cut], 0);
        }
        assert_eq!(problem(&[], 0), Some(Problem::Unreadable));
        assert_eq!(
            problem(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff], 0),
            Some(Problem::Unreadable)
        );
        assert_eq!(problem(b"not a certificate", 0), Some(Problem::Unreadable));
    }
}
