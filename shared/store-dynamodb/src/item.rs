//! Items as attribute maps: building values, reading typed attributes back, expiry. Pure.

use crate::keys::TTL;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;
use std::fmt::Display;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};
use store::StoreError;

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: impl Display) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// A string attribute; missing or of another type is a corrupt record.
pub(crate) fn get_s<'a>(item: &'a Item, name: &str, what: &str) -> Result<&'a str, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(value)) => Ok(value),
        other => Err(corrupt(
            what,
            format!("attribute {name}: expected a string, got {other:?}"),
        )),
    }
}

/// A number attribute parsed as `T`; missing, of another type or out of range is corrupt.
pub(crate) fn get_n<T>(item: &Item, name: &str, what: &str) -> Result<T, StoreError>
where
    T: FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    match item.get(name) {
        Some(AttributeValue::N(value)) => value.parse().map_err(|e| StoreError::Corrupt {
            what: format!("{what} (attribute {name} = {value})"),
            source: Box::new(e),
        }),
        other => Err(corrupt(
            what,
            format!("attribute {name}: expected a number, got {other:?}"),
        )),
    }
}

/// Whether the item's `ttl` (epoch seconds) is before `now_s`. DynamoDB deletes such items
/// eventually; until then they count as absent. A `ttl` that is not a number never expires
/// (DynamoDB ignores it too).
pub(crate) fn is_expired(item: &Item, now_s: i64) -> bool {
    match item.get(TTL) {
        Some(AttributeValue::N(ttl)) => ttl.parse::<i64>().is_ok_and(|ttl| ttl < now_s),
        _ => false,
    }
}

/// The `ttl` (epoch seconds) that keeps a record at least until `until_ms`: rounded up, so
/// DynamoDB never deletes it before then.
pub(crate) fn ttl_for(until_ms: i64) -> i64 {
    until_ms.saturating_add(999).div_euclid(1000)
}

/// Wall-clock seconds since the epoch, for the `ttl` filter on reads.
pub(crate) fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

pub(crate) fn corrupt(
    what: impl Into<String>,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> StoreError {
    StoreError::Corrupt {
        what: what.into(),
        source: source.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_attributes_or_corrupt() {
        let item = Item::from([
            ("name".into(), s("x")),
            ("count".into(), n(7u64)),
            ("neg".into(), n(-1)),
        ]);
        assert_eq!(get_s(&item, "name", "t").unwrap(), "x");
        assert_eq!(get_n::<u64>(&item, "count", "t").unwrap(), 7);
        assert!(matches!(
            get_n::<u64>(&item, "neg", "t"),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(matches!(
            get_s(&item, "count", "t"),
            Err(StoreError::Corrupt { .. })
        ));
        assert!(matches!(
            get_n::<u64>(&item, "gone", "t"),
            Err(StoreError::Corrupt { .. })
        ));
    }

    #[test]
    fn ttl_rounds_up_to_whole_seconds() {
        assert_eq!(ttl_for(1_000), 1);
        assert_eq!(ttl_for(1_001), 2);
        assert_eq!(ttl_for(0), 0);
        assert_eq!(ttl_for(i64::MAX), i64::MAX / 1000);
    }

    #[test]
    fn expiry_is_ttl_before_now() {
        let with_ttl = |ttl: AttributeValue| Item::from([(TTL.into(), ttl)]);
        assert!(is_expired(&with_ttl(n(99)), 100));
        assert!(!is_expired(&with_ttl(n(100)), 100));
        assert!(
            !is_expired(&with_ttl(s("99")), 100),
            "a non-number ttl never expires"
        );
        assert!(!is_expired(&Item::new(), 100));
    }
}
