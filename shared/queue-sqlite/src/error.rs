//! rusqlite errors and stored values, mapped to what the caller should do.

use queue::QueueError;
use std::fmt;

pub(crate) fn unavailable(err: rusqlite::Error) -> QueueError {
    QueueError::Unavailable(Box::new(err))
}

/// A row this build cannot read back. A queued job found so goes to the dead letters (the
/// queue goes on); this error is what putting such a dead letter back by its number answers.
pub(crate) fn corrupt(
    what: String,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> QueueError {
    QueueError::Unavailable(Box::new(CorruptRow {
        what,
        source: source.into(),
    }))
}

/// A stored row that does not decode (edited by hand, or written by a foreign build).
#[derive(Debug)]
pub struct CorruptRow {
    /// Which row, e.g. `job 17`.
    pub what: String,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl fmt::Display for CorruptRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "queue {} is corrupt", self.what)
    }
}

impl std::error::Error for CorruptRow {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// A stored count as a `u32`; anything else is a corrupt row.
pub(crate) fn count(value: i64, what: impl FnOnce() -> String) -> Result<u32, QueueError> {
    u32::try_from(value).map_err(|e| corrupt(what(), e))
}
