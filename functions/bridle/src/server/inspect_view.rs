//! The turn inspector's view of one conversation, built from the stored transcripts alone (the
//! model transcript and the visible one; no second copy): each turn as the model saw it.
//!
//! A turn is the run of messages that share the user message's action id (a resumed turn keeps
//! it, so it stays one turn). Within a turn, each message with a call record is one model
//! request; the messages since the previous request are the ones that request added (the user's
//! message with its context block, then the tool results). The visible entries carry the turn
//! number the engine gave them; the k-th turn of the transcript is the k-th turn number seen
//! there, which is the same count.

use budget::PriceTable;
use serde::Serialize;
use serde_json::{Value, json};
use store::{VisibleEntry, VisibleRole};
use transcript::{CallRecord, Conversation, Message, Part, Reasoning, Role, Usage};

/// The opening of a context block and the line that ends it ([`engine::context`]).
const CONTEXT_OPEN: &str = "<context>\n";
const CONTEXT_CLOSE: &str = "</context>\n<user_message>\n";
const WORDS_CLOSE: &str = "\n</user_message>";

#[derive(Debug, Serialize)]
pub struct ConversationView {
    pub id: String,
    pub channel: String,
    pub purpose: String,
    pub status: transcript::ConversationStatus,
    /// The system prompt version the conversation was last served with (the prefix the
    /// provider caches is this prompt plus the tools each call lists in `tools_offered`).
    pub prompt_version: String,
    pub segment: u32,
    pub turns: Vec<TurnView>,
    pub totals: Totals,
}

#[derive(Debug, Default, Serialize)]
pub struct Totals {
    pub usage: Usage,
    /// Estimated from the budget's price table, in micro-dollars.
    pub cost_micros: u64,
    pub latency_ms: u64,
    pub requests: usize,
}

impl Totals {
    fn add(&mut self, call: &CallView) {
        self.usage += call.usage;
        self.cost_micros += call.cost_micros;
        self.latency_ms += call.latency_ms;
        self.requests += 1;
    }
}

#[derive(Debug, Serialize)]
pub struct TurnView {
    /// 1-based, as the engine counts turns.
    pub number: u64,
    pub segment: u32,
    pub action_id: Option<String>,
    pub started_at_ms: i64,
    /// The user's message as stored and sent, split into its context block and the words.
    pub user: Option<UserView>,
    pub requests: Vec<RequestView>,
    /// Stored after the last request: tool results of a call the turn ended on, the harness's
    /// own lines.
    pub after: Vec<MessageView>,
    pub tool_calls: Vec<ToolCallView>,
    /// What the user saw, as shaped for the conversation's channel.
    pub shown: Vec<ShownView>,
    pub totals: Totals,
}

#[derive(Debug, Serialize)]
pub struct UserView {
    pub position: u64,
    pub context: Option<String>,
    pub words: String,
}

#[derive(Debug, Serialize)]
pub struct RequestView {
    /// 1-based within the turn.
    pub number: usize,
    /// `turn` for a call of the loop, `compaction` for the call that wrote a new segment's
    /// notes.
    pub kind: &'static str,
    pub new_messages: Vec<MessageView>,
    pub reply: MessageView,
    pub call: CallView,
}

#[derive(Debug, Serialize)]
pub struct CallView {
    pub backend: String,
    pub model: String,
    pub stop_reason: Option<String>,
    pub error: Option<String>,
    pub usage: Usage,
    pub cost_micros: u64,
    pub latency_ms: u64,
    pub tools_offered: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct MessageView {
    pub position: u64,
    pub segment: u32,
    pub role: &'static str,
    pub parts: Vec<Value>,
}

#[derive(Debug, Serialize)]
pub struct ToolCallView {
    pub id: String,
    pub name: String,
    pub input: Value,
    /// `None` when no result was stored (the turn ended before it).
    pub result: Option<Value>,
    pub is_error: bool,
}

#[derive(Debug, Serialize)]
pub struct ShownView {
    pub position: u64,
    pub role: VisibleRole,
    pub text: String,
    pub buttons: Vec<String>,
    pub reaction: Option<String>,
}

/// Split a stored user message into its context block and the user's words; a message without
/// a block is all words.
pub fn split_context(text: &str) -> (Option<String>, String) {
    let Some(rest) = text.strip_prefix(CONTEXT_OPEN) else {
        return (None, text.to_owned());
    };
    let Some((block, words)) = rest.split_once(CONTEXT_CLOSE) else {
        return (None, text.to_owned());
    };
    let words = words.strip_suffix(WORDS_CLOSE).unwrap_or(words);
    (Some(block.to_owned()), words.to_owned())
}

fn part_view(part: &Part) -> Value {
    match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Reasoning(Reasoning::Text { text, .. }) => json!({"type": "reasoning", "text": text}),
        Part::Reasoning(Reasoning::Redacted { data }) => {
            json!({"type": "reasoning", "redacted_bytes": data.len()})
        }
        Part::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error})
        }
        Part::Image(m) | Part::Document(m) => json!({
            "type": if matches!(part, Part::Image(_)) { "image" } else { "document" },
            "key": m.key, "mime_type": m.mime_type, "size_bytes": m.size_bytes,
        }),
    }
}

fn message_view(m: &Message) -> MessageView {
    MessageView {
        position: m.position,
        segment: m.segment,
        role: m.role.as_str(),
        parts: m.parts.iter().map(part_view).collect(),
    }
}

fn call_view(call: &CallRecord, prices: &PriceTable) -> CallView {
    CallView {
        backend: call.backend.clone(),
        model: call.model.clone(),
        stop_reason: call.stop_reason.as_ref().map(|s| s.as_str().to_owned()),
        error: call.error.clone(),
        usage: call.usage,
        cost_micros: prices.cost(&call.model, &call.usage),
        latency_ms: call.latency_ms,
        tools_offered: call.tools_offered.clone(),
    }
}

/// Consecutive messages with the same action id (a message without one stands alone).
fn group_turns(messages: &[Message]) -> Vec<&[Message]> {
    let mut groups = Vec::new();
    let mut start = 0;
    for i in 1..=messages.len() {
        let split = i == messages.len()
            || messages[i].action_id.is_none()
            || messages[i].action_id != messages[start].action_id;
        if split {
            groups.push(&messages[start..i]);
            start = i;
        }
    }
    groups
}

fn turn_view(number: u64, messages: &[Message], prices: &PriceTable) -> TurnView {
    let first = &messages[0];
    let mut turn = TurnView {
        number,
        segment: first.segment,
        action_id: first.action_id.clone(),
        started_at_ms: first.created_at_ms,
        user: None,
        requests: Vec::new(),
        after: Vec::new(),
        tool_calls: Vec::new(),
        shown: Vec::new(),
        totals: Totals::default(),
    };
    let mut pending = Vec::new();
    for m in messages {
        if m.role == Role::User && m.call.is_none() && turn.user.is_none() {
            let (context, words) = split_context(&m.text());
            turn.user = Some(UserView {
                position: m.position,
                context,
                words,
            });
        }
        for part in &m.parts {
            match part {
                Part::ToolUse { id, name, input } => turn.tool_calls.push(ToolCallView {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                    result: None,
                    is_error: false,
                }),
                Part::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    if let Some(call) = turn.tool_calls.iter_mut().find(|c| &c.id == tool_use_id) {
                        call.result = Some(content.clone());
                        call.is_error = *is_error;
                    }
                }
                _ => {}
            }
        }
        let Some(call) = &m.call else {
            pending.push(message_view(m));
            continue;
        };
        let call = call_view(call, prices);
        turn.totals.add(&call);
        turn.requests.push(RequestView {
            number: turn.requests.len() + 1,
            kind: if m.role == Role::User {
                "compaction"
            } else {
                "turn"
            },
            new_messages: std::mem::take(&mut pending),
            reply: message_view(m),
            call,
        });
    }
    turn.after = pending;
    turn
}

/// The whole view: every segment's messages (by position) and the visible transcript.
pub fn build(
    conv: &Conversation,
    messages: &[Message],
    visible: &[VisibleEntry],
    prices: &PriceTable,
) -> ConversationView {
    let mut turn_numbers: Vec<u64> = visible.iter().map(|e| e.turn).collect();
    turn_numbers.dedup();
    let mut totals = Totals::default();
    let turns: Vec<TurnView> = group_turns(messages)
        .into_iter()
        .enumerate()
        .map(|(k, group)| {
            let number = turn_numbers.get(k).copied().unwrap_or(k as u64 + 1);
            let mut turn = turn_view(number, group, prices);
            turn.shown = visible
                .iter()
                .filter(|e| e.turn == number)
                .map(|e| ShownView {
                    position: e.position,
                    role: e.role,
                    text: e.text.clone(),
                    buttons: e.buttons.iter().map(|b| b.title.clone()).collect(),
                    reaction: e.reaction.clone(),
                })
                .collect();
            for r in &turn.requests {
                totals.add(&r.call);
            }
            turn
        })
        .collect();
    ConversationView {
        id: conv.id.0.clone(),
        channel: conv.channel.clone(),
        purpose: conv.purpose.clone(),
        status: conv.status,
        prompt_version: conv.prompt_version.clone(),
        segment: conv.segment,
        turns,
        totals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transcript::StopReason;

    fn msg(position: u64, role: Role, parts: Vec<Part>, call: Option<CallRecord>) -> Message {
        Message {
            conversation_id: "c".into(),
            segment: 0,
            position,
            role,
            parts,
            call,
            action_id: Some("a1".into()),
            created_at_ms: 0,
        }
    }

    fn call(stop: StopReason, input: u64) -> CallRecord {
        CallRecord {
            backend: "scripted".into(),
            model: "m".into(),
            stop_reason: Some(stop),
            error: None,
            usage: Usage {
                input_tokens: input,
                output_tokens: 10,
                ..Usage::default()
            },
            latency_ms: 5,
            tools_offered: vec!["t".into()],
        }
    }

    #[test]
    fn the_context_block_splits_from_the_words() {
        let stored = "<context>\nnow: Monday\nuser: You, on web\n</context>\n<user_message>\nhi there\n</user_message>";
        let (context, words) = split_context(stored);
        assert_eq!(context.as_deref(), Some("now: Monday\nuser: You, on web\n"));
        assert_eq!(words, "hi there");
        assert_eq!(split_context("plain"), (None, "plain".into()));
        assert_eq!(
            split_context("<context>\nno end"),
            (None, "<context>\nno end".into())
        );
    }

    #[test]
    fn a_turn_is_its_requests_with_what_each_added_and_the_paired_tool_calls() {
        let messages = vec![
            msg(
                0,
                Role::User,
                vec![Part::text(
                    "<context>\nx\n</context>\n<user_message>\nadd it\n</user_message>",
                )],
                None,
            ),
            msg(
                1,
                Role::Assistant,
                vec![Part::ToolUse {
                    id: "t1".into(),
                    name: "t".into(),
                    input: json!({"a": 1}),
                }],
                Some(call(StopReason::ToolUse, 100)),
            ),
            msg(
                2,
                Role::Tool,
                vec![Part::ToolResult {
                    tool_use_id: "t1".into(),
                    content: json!("done"),
                    is_error: false,
                }],
                None,
            ),
            msg(
                3,
                Role::Assistant,
                vec![Part::text("Added.")],
                Some(call(StopReason::EndTurn, 120)),
            ),
            Message {
                action_id: Some("a2".into()),
                ..msg(4, Role::User, vec![Part::text("thanks")], None)
            },
        ];
        let view = build(
            &Conversation::new("c", "u", "web", "chat"),
            &messages,
            &[],
            &PriceTable::defaults(),
        );
        assert_eq!(view.turns.len(), 2);
        let t = &view.turns[0];
        assert_eq!(t.user.as_ref().unwrap().context.as_deref(), Some("x\n"));
        assert_eq!(t.requests.len(), 2);
        assert_eq!(t.requests[0].new_messages.len(), 1);
        assert_eq!(t.requests[1].new_messages[0].role, "tool");
        assert_eq!(t.tool_calls[0].result, Some(json!("done")));
        assert_eq!(t.totals.usage.input_tokens, 220);
        assert_eq!(view.totals.requests, 2);
        assert!(view.turns[1].requests.is_empty());
        assert_eq!(view.turns[1].after.len(), 1);
    }
}
