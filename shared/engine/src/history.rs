//! From stored rows to the messages a model call sends.

use backend::ChatMessage;
use transcript::Message;

/// Consecutive rows of the same role become one message; parts are copied, never altered.
pub(crate) fn to_chat_messages(rows: &[Message]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(rows.len());
    for row in rows {
        match out.last_mut() {
            Some(last) if last.role == row.role => last.parts.extend(row.parts.iter().cloned()),
            _ => out.push(ChatMessage {
                role: row.role,
                parts: row.parts.clone(),
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use transcript::{Part, Role};

    fn row(position: u64, role: Role, text: &str) -> Message {
        Message {
            conversation_id: "c".into(),
            segment: 0,
            position,
            role,
            parts: vec![Part::text(text)],
            call: None,
            action_id: None,
            created_at_ms: 0,
        }
    }

    #[test]
    fn merges_runs_of_one_role_keeping_parts_in_order() {
        let rows = [
            row(0, Role::User, "a"),
            row(1, Role::Assistant, "b"),
            row(2, Role::Assistant, "c"),
            row(3, Role::Tool, "d"),
            row(4, Role::User, "e"),
        ];
        let msgs = to_chat_messages(&rows);
        let shape: Vec<(Role, Vec<&str>)> = msgs
            .iter()
            .map(|m| (m.role, m.parts.iter().filter_map(Part::as_text).collect()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (Role::User, vec!["a"]),
                (Role::Assistant, vec!["b", "c"]),
                (Role::Tool, vec!["d"]),
                (Role::User, vec!["e"]),
            ]
        );
    }
}
