//! The input estimate as a running total: a turn's calls send the same history again with a
//! few messages more, so only the new messages are measured. The result is exactly
//! [`estimate_input_tokens`](crate::estimate_input_tokens)'s full walk; the cost per call no
//! longer grows with the history.
//!
//! A request's messages share their parts with the turn's history (`Arc<[Part]>`), and shared
//! parts never change, so a message whose parts are the very allocation counted before has the
//! same JSON as then. Per conversation the last measured request is remembered by its first and
//! last message's parts (both kept alive, so their addresses cannot be reused): when the next
//! request starts with the same first message and still holds the same message at that
//! position, everything up to it is counted already. Anything else (compaction, a merged
//! message, another turn's history) is measured from scratch.

use crate::estimate::{BYTES_PER_TOKEN, media_bytes};
use backend::{ChatMessage, ChatRequest, ToolSpec};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use transcript::{ConversationId, Part, json_bytes};

/// Conversations remembered at once; past it the memory starts over (a full walk each).
const REMEMBERED: usize = 1_024;

/// What was measured of a conversation's last request.
#[derive(Debug)]
struct Measured {
    first: Arc<[Part]>,
    last: Arc<[Part]>,
    /// How many messages were measured (the last one is `messages[count - 1]`).
    count: usize,
    /// Σ of the measured messages' JSON bytes and their attachments' ([`media_bytes`]).
    bytes: usize,
    tools: Arc<[ToolSpec]>,
    tools_bytes: usize,
}

/// Input-token estimates kept as running totals per conversation.
#[derive(Debug, Default)]
pub struct RunningEstimate {
    measured: Mutex<HashMap<ConversationId, Measured>>,
}

impl RunningEstimate {
    /// The input tokens `request` (a call of `conversation`) will probably cost: the same
    /// number as `estimate_input_tokens(request)`, measuring only what is new since the
    /// conversation's last request.
    pub fn input_tokens(&self, conversation: &ConversationId, request: &ChatRequest) -> u64 {
        let mut memory = self.measured.lock().unwrap_or_else(|p| p.into_inner());
        let messages = &request.messages;
        let known = memory.get(conversation).filter(|m| continues(m, messages));
        let (from, mut bytes) = known.map_or((0, 0), |m| (m.count, m.bytes));
        let tools_bytes = match known {
            Some(m) if Arc::ptr_eq(&m.tools, &request.tools) => m.tools_bytes,
            _ => json_bytes(&*request.tools),
        };
        bytes += messages[from..]
            .iter()
            .map(|m| json_bytes(m) + media_bytes(m))
            .sum::<usize>();
        if let (Some(first), Some(last)) = (messages.first(), messages.last()) {
            if memory.len() >= REMEMBERED && !memory.contains_key(conversation) {
                memory.clear();
            }
            memory.insert(
                conversation.clone(),
                Measured {
                    first: first.parts.clone(),
                    last: last.parts.clone(),
                    count: messages.len(),
                    bytes,
                    tools: request.tools.clone(),
                    tools_bytes,
                },
            );
        }
        // `[` and `]` around the messages, and a `,` between two.
        let brackets = 2 + messages.len().saturating_sub(1);
        let total = request.system.len() + brackets + bytes + tools_bytes;
        total.div_ceil(BYTES_PER_TOKEN) as u64
    }
}

/// Whether `messages` begin with what `m` measured.
fn continues(m: &Measured, messages: &[ChatMessage]) -> bool {
    m.count > 0
        && messages.len() >= m.count
        && Arc::ptr_eq(&messages[0].parts, &m.first)
        && Arc::ptr_eq(&messages[m.count - 1].parts, &m.last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate_input_tokens;
    use backend::ToolSpec;
    use transcript::Role;

    fn message(role: Role, text: String) -> ChatMessage {
        ChatMessage {
            role,
            parts: vec![Part::text(text)].into(),
        }
    }

    fn request(messages: Vec<ChatMessage>, tools: &Arc<[ToolSpec]>) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system: "You are helpful. \u{00E9}".into(),
            messages,
            tools: tools.clone(),
            settings: Default::default(),
        }
    }

    #[test]
    fn a_long_history_counts_the_same_as_the_full_walk() {
        let running = RunningEstimate::default();
        let conv = ConversationId("c".into());
        let tools: Arc<[ToolSpec]> = vec![ToolSpec {
            name: "list_events".into(),
            description: "List \"events\"".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }]
        .into();
        let mut history = Vec::new();
        for i in 0..2_000 {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            history.push(message(
                role,
                format!("message {i}: caf\u{00E9} \"quoted\"\n"),
            ));
            // Each call sends the history so far: the parts are shared, not copied.
            let r = request(history.clone(), &tools);
            assert_eq!(
                running.input_tokens(&conv, &r),
                estimate_input_tokens(&r),
                "call {i}"
            );
        }
    }

    #[test]
    fn attachments_count_the_same_as_in_the_full_walk() {
        let running = RunningEstimate::default();
        let conv = ConversationId("c".into());
        let tools: Arc<[ToolSpec]> = Vec::new().into();
        let mut history = Vec::new();
        for i in 0..40u64 {
            let media = transcript::MediaRef {
                key: format!("media/{i}"),
                mime_type: if i % 2 == 0 { "text/csv" } else { "image/png" }.into(),
                size_bytes: 10_000 * (i + 1),
            };
            let attachment = match i % 2 {
                0 => Part::Document(media),
                _ => Part::Image(media),
            };
            history.push(ChatMessage {
                role: Role::User,
                parts: vec![Part::text(format!("file {i}")), attachment].into(),
            });
            let r = request(history.clone(), &tools);
            let full = estimate_input_tokens(&r);
            assert_eq!(running.input_tokens(&conv, &r), full, "call {i}");
            assert!(full > 1_600 * (i / 2), "call {i}: {full}");
        }
    }

    #[test]
    fn a_changed_history_is_measured_again() {
        let running = RunningEstimate::default();
        let conv = ConversationId("c".into());
        let tools: Arc<[ToolSpec]> = Vec::new().into();
        let long: Vec<ChatMessage> = (0..50)
            .map(|i| message(Role::User, "x".repeat(100 + i)))
            .collect();
        let r = request(long.clone(), &tools);
        assert_eq!(running.input_tokens(&conv, &r), estimate_input_tokens(&r));
        // Compacted: a summary replaces the history (new parts, fewer messages).
        let compacted = vec![message(Role::User, "summary".into()), long[49].clone()];
        let r = request(compacted, &tools);
        assert_eq!(running.input_tokens(&conv, &r), estimate_input_tokens(&r));
        // The last message grew (merged with a new row): new parts at the same place.
        let mut merged = long.clone();
        merged[49] = message(Role::User, "y".repeat(10_000));
        let r = request(merged, &tools);
        assert_eq!(running.input_tokens(&conv, &r), estimate_input_tokens(&r));
        // Another conversation, and an empty request.
        let r = request(long[..3].to_vec(), &tools);
        let other = ConversationId("d".into());
        assert_eq!(running.input_tokens(&other, &r), estimate_input_tokens(&r));
        let r = request(Vec::new(), &tools);
        assert_eq!(running.input_tokens(&other, &r), estimate_input_tokens(&r));
    }
}
