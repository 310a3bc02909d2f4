//! From stored rows to the messages a model call sends.

use backend::ChatMessage;
use transcript::{Message, Part, Role};

/// The current segment as the messages a model call sends: consecutive rows of the same role
/// merged into one message, parts moved in unaltered. Kept as rows are added, and held once:
/// each call of a turn shares the parts (`Arc` slices) instead of copying the history.
#[derive(Debug, Default, Clone)]
pub(crate) struct History {
    chat: Vec<ChatMessage>,
    /// Whether the newest row holds text with something in it.
    last_row_had_text: bool,
    /// A sentence of the harness's own (an apology, a limit) waiting to become a note on the
    /// user's next message.
    harness_said: Option<String>,
}

impl History {
    pub fn new(rows: Vec<Message>) -> Self {
        let mut history = Self::default();
        for row in rows {
            history.push(row);
        }
        history
    }

    /// Add a stored row. A line the harness said in the assistant's place (an assistant row
    /// without a model call behind it: an apology, a limit, a cut-off note) is not sent as the
    /// assistant's words — small models repeat such lines as answers — but as a neutral note
    /// at the top of the user's next message. Deterministic, so requests stay byte-stable.
    pub fn push(&mut self, row: Message) {
        self.last_row_had_text = row
            .parts
            .iter()
            .any(|p| p.as_text().is_some_and(|t| !t.trim().is_empty()));
        let mut parts = row.parts;
        let harness_line = match (&row.role, &row.call) {
            // A line of the harness's own, in the assistant's place.
            (Role::Assistant, None) => Some(std::mem::take(&mut parts)),
            // A failed call: what streamed before the failure, then the harness's apology.
            (Role::Assistant, Some(call))
                if call.error.is_some() && matches!(parts.last(), Some(Part::Text { .. })) =>
            {
                parts.pop().map(|p| vec![p])
            }
            _ => None,
        };
        if let Some(line) = harness_line {
            let said: String = line.iter().filter_map(Part::as_text).collect();
            let earlier = self.harness_said.take();
            self.harness_said = Some(match earlier {
                Some(e) => format!("{e} {said}"),
                None => said,
            });
            if parts.is_empty() {
                return;
            }
        }
        if row.role == Role::User
            && let Some(said) = self.harness_said.take()
        {
            parts.insert(0, Part::text(harness_note(&said)));
        }
        merge(&mut self.chat, row.role, parts);
    }

    /// The ids of the tool calls asked for since the newest user message (this turn's answers
    /// so far): a later answer's calls are kept under other ids ([`crate::call`]), so no two
    /// calls of a turn share one (a server that numbers each answer's calls from `call_0`
    /// would otherwise have a Yes press run one of them as the other, under its key).
    pub fn this_turns_call_ids(&self) -> Vec<String> {
        self.chat
            .iter()
            .rev()
            .take_while(|m| m.role != Role::User)
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                Part::ToolUse { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect()
    }

    /// The messages to send: a copy of the list whose parts are shared, not copied.
    pub fn chat(&self) -> Vec<ChatMessage> {
        self.chat.clone()
    }

    /// The messages as stored, for reading (compaction).
    pub fn messages(&self) -> &[ChatMessage] {
        &self.chat
    }

    /// The messages to send without reasoning parts (a provider rejected them); a message left
    /// empty is dropped, and the messages on either side merge if they share a role.
    pub fn chat_without_reasoning(&self) -> Vec<ChatMessage> {
        let mut out = Vec::with_capacity(self.chat.len());
        for m in &self.chat {
            let parts: Vec<Part> = m
                .parts
                .iter()
                .filter(|p| !matches!(p, Part::Reasoning(_)))
                .cloned()
                .collect();
            if !parts.is_empty() {
                merge(&mut out, m.role, parts);
            }
        }
        out
    }

    pub fn last_row_had_text(&self) -> bool {
        self.last_row_had_text
    }
}

/// A note the harness puts before the model, in its own tag (which text from anyone else never
/// forms: [`crate::context::neutralise`]).
pub(crate) fn from_the_harness(body: &str) -> String {
    format!("<{0}>{body}</{0}>", crate::context::HARNESS_NOTE_TAG)
}

/// What the model reads instead of the harness's own line.
pub(crate) fn harness_note(said: &str) -> String {
    from_the_harness(&format!(
        "the previous reply could not be completed as usual, and the user was shown this \
         instead: \"{}\". Do not repeat it; answer what follows.",
        said.trim()
    ))
}

/// Append `parts` as a message of `role`, or to the last message when it has that role.
fn merge(out: &mut Vec<ChatMessage>, role: Role, parts: Vec<Part>) {
    match out.last_mut() {
        Some(last) if last.role == role => {
            let mut all = last.parts.to_vec();
            all.extend(parts);
            last.parts = all.into();
        }
        _ => out.push(ChatMessage::new(role, parts)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transcript::Reasoning;

    fn record(error: Option<&str>) -> transcript::CallRecord {
        transcript::CallRecord {
            backend: "b".into(),
            model: "m".into(),
            stop_reason: None,
            error: error.map(str::to_owned),
            usage: transcript::Usage::default(),
            latency_ms: 0,
            tools_offered: vec![],
        }
    }

    /// A stored row; an assistant row is the model's (it has a call record).
    fn row(position: u64, role: Role, parts: Vec<Part>) -> Message {
        Message {
            conversation_id: "c".into(),
            segment: 0,
            position,
            role,
            parts,
            call: (role == Role::Assistant).then(|| record(None)),
            action_id: None,
            created_at_ms: 0,
        }
    }

    #[test]
    fn the_harness_lines_reach_the_model_as_a_note_not_as_its_own_words() {
        let apology = "Sorry, that took too long and I had to stop. Please try again in a moment.";
        let history = History::new(vec![
            text(0, Role::User, "a"),
            // A failed call: the start of an answer, then the harness's apology.
            Message {
                call: Some(record(Some("timeout"))),
                ..row(
                    1,
                    Role::Assistant,
                    vec![Part::text("Half an"), Part::text(apology)],
                )
            },
            text(2, Role::User, "b"),
            // A line of the harness alone (a limit), no model call behind it.
            Message {
                call: None,
                ..text(3, Role::Assistant, "You've reached this hour's limit.")
            },
            text(4, Role::User, "c"),
        ]);
        let chat = history.chat();
        let shape = shape(&chat);
        assert_eq!(shape[1], (Role::Assistant, vec!["Half an"]));
        // Both lines become notes in the user's turn; no assistant message says them.
        assert_eq!(shape.len(), 3, "{shape:?}");
        let (role, texts) = &shape[2];
        assert_eq!(*role, Role::User);
        assert_eq!(texts.len(), 4, "{texts:?}");
        assert!(texts[0].starts_with("<harness_note>") && texts[0].contains(apology));
        assert_eq!(texts[1], "b");
        assert!(texts[2].starts_with("<harness_note>") && texts[2].contains("hour's limit"));
        assert_eq!(texts[3], "c");
    }

    fn text(position: u64, role: Role, text: &str) -> Message {
        row(position, role, vec![Part::text(text)])
    }

    fn thought(text: &str) -> Part {
        Part::Reasoning(Reasoning::Text {
            text: text.into(),
            signature: Some("sig".into()),
        })
    }

    fn shape(msgs: &[ChatMessage]) -> Vec<(Role, Vec<&str>)> {
        msgs.iter()
            .map(|m| {
                let texts = m
                    .parts
                    .iter()
                    .map(|p| match p {
                        Part::Reasoning(_) => "(thought)",
                        p => p.as_text().unwrap_or("(other)"),
                    })
                    .collect();
                (m.role, texts)
            })
            .collect()
    }

    #[test]
    fn merges_runs_of_one_role_keeping_parts_in_order() {
        let history = History::new(vec![
            text(0, Role::User, "a"),
            text(1, Role::Assistant, "b"),
            text(2, Role::Assistant, "c"),
            text(3, Role::Tool, "d"),
            text(4, Role::User, "e"),
        ]);
        assert_eq!(
            shape(&history.chat()),
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
        let rows = vec![
            text(0, Role::User, "a"),
            text(1, Role::Assistant, "b"),
            text(2, Role::Assistant, "c"),
            text(3, Role::Tool, "d"),
            text(4, Role::Tool, "e"),
            text(5, Role::User, "f"),
        ];
        let mut history = History::new(rows[..2].to_vec());
        let before = history.chat();
        for r in &rows[2..] {
            history.push(r.clone());
        }
        assert_eq!(history.chat(), History::new(rows.clone()).chat());
        // A request already built keeps what it was built with.
        assert_eq!(before, History::new(rows[..2].to_vec()).chat());
    }

    #[test]
    fn without_reasoning_drops_emptied_messages_and_merges_their_neighbours() {
        let history = History::new(vec![
            text(0, Role::User, "a"),
            row(1, Role::Assistant, vec![thought("only thinking")]),
            text(2, Role::User, "b"),
            row(3, Role::Assistant, vec![thought("t"), Part::text("c")]),
        ]);
        assert_eq!(
            shape(&history.chat_without_reasoning()),
            vec![(Role::User, vec!["a", "b"]), (Role::Assistant, vec!["c"])]
        );
        assert_eq!(
            shape(&history.chat())[1],
            (Role::Assistant, vec!["(thought)"]),
            "the history itself keeps its reasoning"
        );
    }

    #[test]
    fn knows_whether_the_newest_row_had_text() {
        let mut history = History::new(vec![text(0, Role::User, "a")]);
        assert!(history.last_row_had_text());
        history.push(row(
            1,
            Role::Assistant,
            vec![thought("t"), Part::text("  ")],
        ));
        assert!(!history.last_row_had_text());
        history.push(text(2, Role::Assistant, "said"));
        assert!(history.last_row_had_text());
    }
}
