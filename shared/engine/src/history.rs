//! From stored rows to the messages a model call sends.

use backend::ChatMessage;
use transcript::Message;

/// The current segment's rows, and the same rows as the messages a model call sends, kept in
/// step as rows are added so that each call of a turn shares them instead of rebuilding them.
#[derive(Debug, Default)]
pub(crate) struct History {
    rows: Vec<Message>,
    chat: Vec<ChatMessage>,
}

impl History {
    pub fn new(rows: Vec<Message>) -> Self {
        let chat = to_chat_messages(&rows);
        Self { rows, chat }
    }

    pub fn rows(&self) -> &[Message] {
        &self.rows
    }

    pub fn push(&mut self, row: Message) {
        merge(&mut self.chat, &row);
        self.rows.push(row);
    }

    /// The messages to send: a copy of the list whose parts are shared, not copied.
    pub fn chat(&self) -> Vec<ChatMessage> {
        self.chat.clone()
    }
}

/// Consecutive rows of the same role become one message; parts are copied, never altered.
pub(crate) fn to_chat_messages(rows: &[Message]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(rows.len());
    for row in rows {
        merge(&mut out, row);
    }
    out
}

fn merge(out: &mut Vec<ChatMessage>, row: &Message) {
    match out.last_mut() {
        Some(last) if last.role == row.role => {
            let mut parts = last.parts.to_vec();
            parts.extend(row.parts.iter().cloned());
            last.parts = parts.into();
        }
        _ => out.push(ChatMessage::new(row.role, row.parts.clone())),
    }
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

    #[test]
    fn rows_added_one_by_one_give_the_same_messages_as_all_at_once() {
        let rows = [
            row(0, Role::User, "a"),
            row(1, Role::Assistant, "b"),
            row(2, Role::Assistant, "c"),
            row(3, Role::Tool, "d"),
            row(4, Role::Tool, "e"),
            row(5, Role::User, "f"),
        ];
        let mut history = History::new(rows[..2].to_vec());
        let before = history.chat();
        for r in &rows[2..] {
            history.push(r.clone());
        }
        assert_eq!(history.chat(), to_chat_messages(&rows));
        assert_eq!(history.rows(), &rows);
        // A request already built keeps what it was built with.
        assert_eq!(before, to_chat_messages(&rows[..2]));
    }
}
