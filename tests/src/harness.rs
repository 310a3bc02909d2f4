use backend::{Reply, ScriptedModel};
use engine::{CollectSink, Engine, EngineOptions, Guard, TurnEvent, TurnOutcome};
use std::sync::Arc;
use store::{ConversationStore, MessageStore, VisibleEntry, VisibleStore};
use store_sqlite::SqliteStore;
use tools::Registry;
use transcript::{Conversation, ConversationId, Message};

use crate::{Calls, sample_tools, web_job, web_jobs};
use queue::TurnJob;

/// The real engine on an in-memory SQLite store, driven by a scripted model.
#[allow(missing_debug_implementations)]
pub struct Harness {
    pub model: Arc<ScriptedModel>,
    pub store: Arc<SqliteStore>,
    pub engine: Arc<Engine>,
    pub calls: Calls,
    pub conversation: ConversationId,
    turns: std::sync::atomic::AtomicU32,
}

/// What one turn produced, as the user and the caller saw it.
#[derive(Debug)]
pub struct Turned {
    pub outcome: TurnOutcome,
    pub events: Vec<TurnEvent>,
}

impl Harness {
    /// The sample tools, default options.
    pub async fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        Self::build(replies, None, EngineOptions::default(), None).await
    }

    pub async fn with_options(
        replies: impl IntoIterator<Item = Reply>,
        options: EngineOptions,
    ) -> Self {
        Self::build(replies, None, options, None).await
    }

    pub async fn with_guard(
        replies: impl IntoIterator<Item = Reply>,
        guard: Arc<dyn Guard>,
    ) -> Self {
        Self::build(replies, None, EngineOptions::default(), Some(guard)).await
    }

    pub async fn build(
        replies: impl IntoIterator<Item = Reply>,
        tools: Option<Registry>,
        options: EngineOptions,
        guard: Option<Arc<dyn Guard>>,
    ) -> Self {
        let calls = Calls::default();
        let tools = tools.unwrap_or_else(|| sample_tools(calls.clone()));
        let store = Arc::new(SqliteStore::open_in_memory().unwrap());
        let mut harness = Self::build_on(store, replies, tools, options, |engine| match guard {
            Some(g) => engine.with_guard(g),
            None => engine,
        })
        .await;
        harness.calls = calls;
        harness
    }

    /// The engine on a given store and tools; `configure` adds guards or gates to it.
    pub async fn build_on(
        store: Arc<SqliteStore>,
        replies: impl IntoIterator<Item = Reply>,
        tools: Registry,
        mut options: EngineOptions,
        configure: impl FnOnce(Engine) -> Engine,
    ) -> Self {
        let model = Arc::new(ScriptedModel::new(replies));
        if options.model_id.is_empty() {
            options.model_id = "test-model".into();
        }
        if options.system_prompt.is_empty() {
            options.system_prompt = "You are Bridle's test assistant.".into();
        }
        let engine = Arc::new(configure(Engine::new(
            model.clone(),
            Arc::new(tools),
            store.clone(),
            options,
        )));
        let conversation = ConversationId::from("conv-1");
        let mut conv = Conversation::new(conversation.clone(), "user-1", "web", "planner");
        conv.created_at_ms = 1;
        store.create_conversation(&conv).await.unwrap();
        Self {
            model,
            store,
            engine,
            calls: Calls::default(),
            conversation,
            turns: Default::default(),
        }
    }

    /// Change the engine (context source, clock, …) before the first turn.
    pub fn customise(self, f: impl FnOnce(Engine) -> Engine) -> Self {
        let engine = Arc::try_unwrap(self.engine)
            .unwrap_or_else(|_| panic!("customise the engine before the first turn"));
        Self {
            engine: Arc::new(f(engine)),
            ..self
        }
    }

    /// Run one turn through the one job path, as the web chat does (message id `act-N`, so
    /// action id `web#act-N`), and check the invariant every turn must keep: what the user saw
    /// (tokens and error lines) is exactly the reply, and exactly what the visible transcript
    /// recorded.
    pub async fn turn(&self, text: &str) -> Turned {
        self.turn_sent_at(text, 0).await
    }

    /// [`Harness::turn`], the message received at `sent_at_ms` (0: not said).
    pub async fn turn_sent_at(&self, text: &str, sent_at_ms: i64) -> Turned {
        let n = self.turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let sink = CollectSink::default();
        let conv = self
            .store
            .conversation(&self.conversation)
            .await
            .unwrap()
            .expect("the harness's conversation exists");
        let jobs = web_jobs(self.engine.clone(), self.store.clone(), Arc::default());
        let job = TurnJob {
            received_at_ms: sent_at_ms,
            ..web_job(
                &self.conversation.0,
                &conv.user_id.0,
                &format!("act-{n}"),
                text,
            )
        };
        let ran = jobs
            .run_streamed(&job, std::time::Duration::from_secs(600), &sink)
            .await;
        let outcome = ran
            .turn
            .unwrap_or_else(|| panic!("the turn did not run: {:?}", ran.outcome));
        let events = sink.events();
        let mut seen = String::new();
        for e in &events {
            match e {
                TurnEvent::Token { text } => seen.push_str(text),
                TurnEvent::Error { message } => {
                    if !seen.is_empty() && !seen.ends_with('\n') {
                        seen.push_str("\n\n");
                    }
                    seen.push_str(message);
                }
                _ => {}
            }
        }
        // A reply with markers is shown as the shaped text; otherwise as it streamed.
        let shaped = events.iter().find_map(|e| match e {
            TurnEvent::Shaped { text, .. } => Some(text.clone()),
            _ => None,
        });
        if shaped.is_none() {
            assert_eq!(
                seen, outcome.reply,
                "the reply differs from what was streamed"
            );
        }
        let shown = shaped.unwrap_or_else(|| outcome.reply.clone());
        assert!(
            matches!(events.last(), Some(TurnEvent::Done { end }) if *end == outcome.end),
            "a turn must end with a done event"
        );
        let visible = self.visible().await;
        let last = visible.last().unwrap();
        if shown.is_empty() {
            assert_eq!(
                last.text, text,
                "no reply: the user's message is the last entry"
            );
        } else {
            assert_eq!(
                last.text, shown,
                "visible transcript differs from what was shown"
            );
        }
        Turned { outcome, events }
    }

    /// The model transcript of the current segment.
    pub async fn transcript(&self) -> Vec<Message> {
        self.store.messages(&self.conversation, 0).await.unwrap()
    }

    pub async fn visible(&self) -> Vec<VisibleEntry> {
        self.store.visible(&self.conversation).await.unwrap()
    }
}
