//! rusqlite errors and integer conversions, mapped to what the caller should do.

use rusqlite::ffi;
use store::StoreError;

/// `Conflict` when the primary key is taken, `Unavailable` for anything else.
pub(crate) fn write_error(err: rusqlite::Error, what: impl FnOnce() -> String) -> StoreError {
    match err.sqlite_error() {
        Some(e) if e.extended_code == ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
            StoreError::Conflict { what: what() }
        }
        _ => unavailable(err),
    }
}

pub(crate) fn unavailable(err: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(Box::new(err))
}

pub(crate) fn corrupt(
    what: String,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> StoreError {
    StoreError::Corrupt {
        what,
        source: source.into(),
    }
}

/// A `u64` as an SQLite integer. Values past `i64::MAX` cannot be stored.
pub(crate) fn to_sql(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| {
        StoreError::Unavailable(format!("{what} {value} is beyond SQLite's integer range").into())
    })
}

/// An SQLite integer as a `u64`; a negative value is a corrupt row.
pub(crate) fn from_sql(value: i64, what: impl FnOnce() -> String) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|e| corrupt(what(), e))
}
