use async_trait::async_trait;
use backend::{BackendError, ChatModel, ChatRequest, EventStream, Reply, ScriptedModel};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use transcript::Role;

/// Answers "echo: <the last user message>", slowly, and records how many calls ran at once per
/// conversation and overall. For ordering and parallelism tests.
#[derive(Debug, Default)]
pub struct EchoModel {
    /// Wait before the answer's first token.
    pub delay: Duration,
    running: AtomicUsize,
    pub max_running: AtomicUsize,
    /// (system prompt's conversation marker is not available; the first user text is used)
    running_by_conversation: Mutex<std::collections::HashMap<String, usize>>,
    pub max_running_in_one_conversation: AtomicUsize,
}

impl EchoModel {
    pub fn new(delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            delay,
            ..Self::default()
        })
    }
}

#[async_trait]
impl ChatModel for EchoModel {
    fn name(&self) -> &str {
        "echo"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, BackendError> {
        let conversation = request
            .messages
            .iter()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.parts.first())
            .and_then(|p| p.as_text())
            .map(user_words)
            .unwrap_or_default()
            .to_owned();
        let last = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| {
                m.parts
                    .iter()
                    .filter_map(|p| p.as_text())
                    .map(user_words)
                    .collect::<String>()
            })
            .unwrap_or_default();
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(now, Ordering::SeqCst);
        let in_conv = {
            let mut map = self.running_by_conversation.lock().unwrap();
            let n = map.entry(conversation.clone()).or_default();
            *n += 1;
            *n
        };
        self.max_running_in_one_conversation
            .fetch_max(in_conv, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        *self
            .running_by_conversation
            .lock()
            .unwrap()
            .get_mut(&conversation)
            .unwrap() -= 1;
        let model = ScriptedModel::new([Reply::text(&format!("echo: {last}"))]);
        model.stream(request).await
    }
}

/// The user's own words: the inside of the `<user_message>` block when the engine wrapped them
/// in a context block, else the text as it is.
fn user_words(text: &str) -> &str {
    text.split_once("<user_message>\n")
        .and_then(|(_, rest)| rest.rsplit_once("\n</user_message>"))
        .map_or(text, |(words, _)| words)
}
