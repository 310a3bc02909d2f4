//! The neutral transcript: the record of a conversation that Bridle owns.
//!
//! Every provider adapter converts *from* these types on the way out and *into* them on the way
//! back; nothing provider-specific is stored. The record is append-only: a [`Message`] is written
//! once at its `(segment, position)` and never edited. Media is held by reference
//! ([`MediaRef`]), never as bytes.
//!
//! This crate depends on serde only (and `serde_json` for tool inputs and results). It must never
//! depend on a backend, a store, or any AWS or Lambda crate.

mod conversation;
mod grant;
mod invisible;
mod json_chars;
mod message;
mod part;
mod usage;

pub use conversation::{Conversation, ConversationId, ConversationStatus, UserId};
pub use grant::Grant;
pub use invisible::is_invisible_format;
pub use json_chars::{json_bytes, json_chars};
pub use message::{CallRecord, Message, Role};
pub use part::{MediaRef, Part, Reasoning};
pub use usage::{StopReason, Usage};
