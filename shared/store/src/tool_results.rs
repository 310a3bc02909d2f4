//! Per-call tool results (DESIGN invariant 10): each call's result is written the moment the
//! call finishes, keyed by the conversation, the position of the assistant message that asked
//! for it, and the model's id for the call — so a turn resumed after a crash reuses it instead
//! of running the tool again. The tool message the model sees still carries all the results of
//! one answer together; it is written once they are all in.
//!
//! A tool that writes to Bridle's own store commits a [`crate::Receipt`] with its effect (one
//! transaction), so even a crash between the effect and the result record repeats nothing: the
//! resumed turn answers the call from the receipt.

use crate::StoreError;
use async_trait::async_trait;
use serde_json::Value;
use std::collections::HashMap;
use transcript::{ConversationId, Part};

#[async_trait]
pub trait ToolResults: Send + Sync {
    /// Record the result of call `tool_use_id` asked for by the assistant message at
    /// `asked_at`. [`StoreError::Conflict`] when one is already stored (the first stays).
    async fn put_tool_result(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
    ) -> Result<(), StoreError>;

    /// The stored results of the calls the message at `asked_at` asked for, by call id.
    async fn tool_results(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
    ) -> Result<HashMap<String, Part>, StoreError>;

    /// The output recorded with the effect of the call whose key is `call_key`
    /// ([`crate::Receipt`], written by [`crate::Records::commit`]), if that effect committed.
    async fn receipt(&self, call_key: &str) -> Result<Option<Value>, StoreError>;
}
