//! Money as integer micro-dollars (1 USD = 1,000,000): no float ever touches a sum.

/// Micro-dollars in one dollar.
pub const MICROS_PER_USD: u64 = 1_000_000;

/// A decimal dollar amount (`"3"`, `"0.075"`, `"12.50"`) in micro-dollars; `None` when it is not
/// a plain non-negative decimal with at most six places.
pub fn parse_usd(text: &str) -> Option<u64> {
    let text = text.trim().trim_start_matches('$');
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(frac) || frac.len() > 6 {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let frac: u64 = format!("{frac:0<6}").parse().ok()?;
    whole.checked_mul(MICROS_PER_USD)?.checked_add(frac)
}

/// Micro-dollars as dollars with cents, rounded up to the cent when needed ("$0.01" for any
/// positive amount below a cent), e.g. `$12.50`.
pub fn format_usd(micros: u64) -> String {
    let cents = micros.div_ceil(10_000);
    format!("${}.{:02}", cents / 100, cents % 100)
}

/// Micro-dollars as an exact decimal dollar string, e.g. `0.000123`.
pub fn usd_exact(micros: u64) -> String {
    let frac = micros % MICROS_PER_USD;
    if frac == 0 {
        return (micros / MICROS_PER_USD).to_string();
    }
    let s = format!("{}.{:06}", micros / MICROS_PER_USD, frac);
    s.trim_end_matches('0').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_dollars_parse_exactly() {
        assert_eq!(parse_usd("3"), Some(3_000_000));
        assert_eq!(parse_usd("0.075"), Some(75_000));
        assert_eq!(parse_usd("$12.50"), Some(12_500_000));
        assert_eq!(parse_usd(".5"), Some(500_000));
        assert_eq!(parse_usd("0.000001"), Some(1));
        for bad in ["", ".", "-1", "1e3", "0.0000001", "abc", "1.2.3"] {
            assert_eq!(parse_usd(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn amounts_print_as_dollars() {
        assert_eq!(format_usd(12_500_000), "$12.50");
        assert_eq!(format_usd(1), "$0.01");
        assert_eq!(format_usd(0), "$0.00");
        assert_eq!(usd_exact(75_000), "0.075");
        assert_eq!(usd_exact(20_000_000), "20");
    }
}
