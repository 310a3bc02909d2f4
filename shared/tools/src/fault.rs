//! A pause for crash tests of the real binary: with `BRIDLE_FAULT_PAUSE_TOOL=before_call` (or
//! `after_call`), the runner stops for good just before a handler runs (or just after it
//! returned, before the engine records its result) and logs one WARN line, so a test can
//! `kill -9` the process at exactly that point. Unset (always, outside such tests) it costs one
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

fn asked() -> Option<Pause> {
    static ASKED: OnceLock<Option<Pause>> = OnceLock::new();
    *ASKED.get_or_init(|| match std::env::var(FAULT_PAUSE_VAR).ok()?.as_str() {
        "before_call" => Some(Pause::BeforeCall),
        "after_call" => Some(Pause::AfterCall),
        _ => None,
    })
}

/// Never returns when a pause at `here` was asked for.
pub(crate) async fn pause_if_asked(here: Pause, tool: &str) {
    if asked() == Some(here) {
        tracing::warn!(tool, at = ?here, "{PAUSED}");
        std::future::pending::<()>().await;
    }
}
