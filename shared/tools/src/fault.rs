//! A pause for crash tests of the real binary: with `BRIDLE_FAULT_PAUSE_TOOL=before_call` (or
//! `after_call`), the runner stops for good just before a handler runs (or just after it
//! returned, before the engine records its result) and logs one WARN line, so a test can
//! `kill -9` the process at exactly that point. `after_call:delete_note` pauses only that
//! tool's calls. Unset (always, outside such tests) it costs one
//! read of a cached value. Compiled into every build on purpose: a test-only feature would make
//! the tests run a second build of the workspace.

use std::sync::OnceLock;

/// Where a call may be paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pause {
    BeforeCall,
    AfterCall,
}

/// The environment variable that asks for a pause.
pub const FAULT_PAUSE_VAR: &str = "BRIDLE_FAULT_PAUSE_TOOL";

/// The line logged when the runner pauses.
pub const PAUSED: &str = "tool call paused for a crash test";

/// Where to pause, and for which tool (`None`: any).
fn asked() -> Option<&'static (Pause, Option<String>)> {
    static ASKED: OnceLock<Option<(Pause, Option<String>)>> = OnceLock::new();
    ASKED
        .get_or_init(|| {
            let value = std::env::var(FAULT_PAUSE_VAR).ok()?;
            let (at, tool) = match value.split_once(':') {
                Some((at, tool)) => (at, Some(tool.to_owned())),
                None => (value.as_str(), None),
            };
            let at = match at {
                "before_call" => Pause::BeforeCall,
                "after_call" => Pause::AfterCall,
                _ => return None,
            };
            Some((at, tool))
        })
        .as_ref()
}

/// Never returns when a pause at `here` was asked for (for this tool, or for any).
pub(crate) async fn pause_if_asked(here: Pause, tool: &str) {
    let Some((at, only)) = asked() else { return };
    if *at == here && only.as_deref().is_none_or(|only| only == tool) {
        tracing::warn!(tool, at = ?here, "{PAUSED}");
        std::future::pending::<()>().await;
    }
}
