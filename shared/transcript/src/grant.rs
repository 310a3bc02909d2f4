use serde::{Deserialize, Serialize};
use std::fmt;

/// How far the assistant (or an MCP token) may reach for the person it works for: a capped
/// subset of the person's own rights, each level including the ones before it.
///
/// It caps calls, never the tool list: the tools offered to a model are the same under every
/// grant (a frozen prefix), and a call outside the grant gets a readable refusal.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    /// Only tools that change nothing.
    Read,
    /// Also tools that change things, but none of the calls the confirmation policy calls risky.
    Write,
    /// Everything the person may do; a risky call still waits for the person's yes.
    #[default]
    Risky,
}

impl Grant {
    pub const ALL: [Grant; 3] = [Grant::Read, Grant::Write, Grant::Risky];

    pub fn as_str(self) -> &'static str {
        match self {
            Grant::Read => "read",
            Grant::Write => "write",
            Grant::Risky => "risky",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.as_str() == text)
    }

    /// Tools that change things may run.
    pub fn allows_writes(self) -> bool {
        self >= Grant::Write
    }

    /// Risky calls may be held for the person's yes (and then run).
    pub fn allows_risky(self) -> bool {
        self >= Grant::Risky
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_include_the_ones_before_and_round_trip() {
        assert!(Grant::Read < Grant::Write && Grant::Write < Grant::Risky);
        assert_eq!(Grant::default(), Grant::Risky);
        assert!(!Grant::Read.allows_writes() && Grant::Write.allows_writes());
        assert!(!Grant::Write.allows_risky() && Grant::Risky.allows_risky());
        for g in Grant::ALL {
            assert_eq!(Grant::parse(g.as_str()), Some(g));
            assert_eq!(serde_json::to_string(&g).unwrap(), format!("\"{g}\""));
        }
        assert_eq!(Grant::parse("admin"), None);
    }
}
