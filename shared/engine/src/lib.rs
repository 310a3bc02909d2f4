//! The turn: one user message in, a reply out, with the model and the tools in between.
//!
//! [`Engine::run_turn`] appends the user's message, then loops: guard check, model call
//! (streamed to an [`EventSink`], with a deadline, an idle timeout and one retry only if nothing
//! was streamed), persist the assistant message with its call record, run the requested tools in
//! order and persist their results together, and go again — at most `max_cycles` times. Every
//! stop reason and every failure ends in a sentence the user can read, recorded in history so the
//! next turn is coherent; raw errors go to the log only.
//!
//! Depends on the ports (`backend`, `tools`, `store`) and `transcript`; never on an adapter, AWS
//! or Lambda. No storage transaction spans a model call.

mod abandon;
pub use abandon::Abandoned;
mod call;
mod compact;
mod confirm;
pub mod context;
mod engine;
mod error;
mod events;
mod guard;
mod history;
mod imitations;
mod input;
mod lean;
pub mod lines;
mod open_tools;
mod options;
pub mod prompt;
mod replay;
mod resume;
pub mod shape;
mod spans;
mod specs;
mod turn;
mod typed_yes;
mod yes_words;
pub use typed_yes::{CONFIRM_CODE_DIGITS, CodeKey, TypedYes, confirm_code};
pub use yes_words::affirms;

pub use turn::MAX_CALLS_PER_ANSWER;

pub use compact::COMPACTION_PROMPT;
pub use confirm::{
    Answer, Clock, ConfirmationGate, ConfirmationOptions, IF_YES, NO_TITLE, Press, RiskPolicy,
    STALE_PRESS, TTL_VAR, YES_TITLE, call_hash, confirm_buttons, is_confirm_button,
    needs_confirmation, risk_policy,
};
pub use context::{ContextFacts, ContextSource, HARNESS_NOTE_TAG, NoFacts, context_source};
pub use engine::{Engine, TurnEnd, TurnInput, TurnOutcome, TurnRead};
pub use error::EngineError;
pub use events::{CollectSink, EventSink, NullSink, TurnEvent};
pub use guard::{
    AllowAll, CallReport, Denied, DeniedKind, Guard, GuardCall, Permit, Prepared, Settlement,
};
pub use lean::Lean;
pub use options::EngineOptions;
pub use prompt::{DEFAULT_SYSTEM_PROMPT, PROMPT_VERSION, SystemPrompt};
pub use replay::{FailedReplay, Replay, ReplayedCall};
pub use shape::{Shaped, ShapedButton, shape};
pub use spans::trace_content;
