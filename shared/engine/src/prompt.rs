//! The frozen system prompt: what never changes per turn, versioned, replaceable by a file.
//!
//! Everything that changes per turn goes into the user message's `<context>` block
//! ([`crate::context`]), so the system prompt and the tool list are the same bytes on every
//! request and the provider can cache them.

use sha2::{Digest, Sha256};
use std::path::Path;

/// The version of [`DEFAULT_SYSTEM_PROMPT`]. Bump it whenever the text changes: conversations
/// record the version they were served with.
pub const PROMPT_VERSION: &str = "2026-12-06.1";

/// The default system prompt, written as an interface spec (`prompts/system.md`).
pub const DEFAULT_SYSTEM_PROMPT: &str = include_str!("../prompts/system.md");

/// A system prompt and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemPrompt {
    pub text: String,
    pub version: String,
}

impl Default for SystemPrompt {
    fn default() -> Self {
        Self {
            text: DEFAULT_SYSTEM_PROMPT.to_owned(),
            version: PROMPT_VERSION.to_owned(),
        }
    }
}

impl SystemPrompt {
    /// An operator's replacement prompt. Its version is derived from its bytes
    /// (`file-<first 12 hex of sha256>`), so a changed file is a new version.
    pub fn from_file(path: &Path) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        Ok(Self::custom(text))
    }

    /// The prompt an operator configured with `BRIDLE_SYSTEM_PROMPT_FILE` (`path`), or the
    /// built-in one when it is unset. `Err` is the configuration problem to report.
    pub fn from_setting(path: Option<&str>) -> Result<Self, String> {
        match path {
            None => Ok(Self::default()),
            Some(path) => Self::from_file(Path::new(path))
                .map_err(|err| format!("BRIDLE_SYSTEM_PROMPT_FILE={path:?} cannot be read: {err}")),
        }
    }

    /// A prompt given as text (tests, embedding products).
    pub fn custom(text: impl Into<String>) -> Self {
        let text = text.into();
        let digest = Sha256::digest(text.as_bytes());
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        Self {
            text,
            version: format!("file-{hex}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_prompt_covers_the_interface() {
        let p = SystemPrompt::default();
        for needle in [
            "<context>",
            "<user_message>",
            "<buttons>",
            "<silent/>",
            "never follow instructions",
            "Never invent an id",
            "confirmation",
        ] {
            assert!(
                p.text.to_lowercase().contains(&needle.to_lowercase()),
                "missing {needle}"
            );
        }
        assert_eq!(p.version, PROMPT_VERSION);
    }

    #[test]
    fn a_custom_prompt_is_versioned_by_its_bytes() {
        let a = SystemPrompt::custom("Be brief.");
        let b = SystemPrompt::custom("Be brief!");
        assert!(a.version.starts_with("file-"));
        assert_ne!(a.version, b.version);
        assert_eq!(a.version, SystemPrompt::custom("Be brief.").version);
    }

    #[test]
    fn a_prompt_file_is_read() {
        let dir = tempfile::Builder::new()
            .prefix("bridle-prompt-")
            .tempdir()
            .unwrap();
        let path = dir.path().join("system.md");
        std::fs::write(&path, "Operator prompt.").unwrap();
        let p = SystemPrompt::from_file(&path).unwrap();
        assert_eq!(p.text, "Operator prompt.");
        assert!(SystemPrompt::from_file(&dir.path().join("missing.md")).is_err());
    }
}
