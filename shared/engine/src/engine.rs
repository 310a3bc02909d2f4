//! The engine and what a turn takes and gives: [`Engine::run_turn`] and its input and outcome.

use crate::context::ContextSource;
use crate::lean::Lean;
use crate::open_tools::OpenTools;
use crate::turn::Turn;
use crate::{AllowAll, Clock, EngineError, EngineOptions, EventSink, Guard};
use backend::ChatModel;
use serde::Serialize;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use store::Store;
use tools::{ActionId, Registry};
use tracing::Instrument;
use transcript::{Conversation, ConversationId, Usage, UserId};

/// What the caller of [`Engine::run_turn_in`] read for the turn, holding the conversation's
/// lease.
#[derive(Debug, Clone)]
pub struct TurnRead {
    pub conversation: Conversation,
    /// The conversation's user's account as read with it (`Some(None)`: there is none);
    /// `None` when it was not read, and the turn reads it.
    pub account: Option<Option<store::Account>>,
    /// Where the next visible entry goes as read with it ([`store::StartRead::next_visible`]:
    /// never past the truth, maybe behind it); `None`: the turn asks the store.
    pub next_visible: Option<u64>,
    /// The conversation's current segment as read with it
    /// ([`store::StartRead::messages`]); `None`: the turn reads it.
    pub messages: Option<Vec<transcript::Message>>,
    /// The context block's facts for the conversation's user, as read beside it
    /// ([`Engine::context_facts`]); `None`: the turn reads them when it writes the user's
    /// message.
    pub facts: Option<Result<crate::ContextFacts, String>>,
}

impl TurnRead {
    /// Whether the turn of `action_id` started before, as this read shows: its user message is
    /// in the segment read (found as a resumed turn finds it). Run again, such a turn
    /// resumes from what it stored, and its input's attachments and notes go unused. `false`
    /// when the segment was not read.
    pub fn has_started(&self, action_id: &ActionId) -> bool {
        self.messages
            .as_deref()
            .is_some_and(|history| crate::resume::find(history, &action_id.0).is_some())
    }
}

/// One user message to answer.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub conversation_id: ConversationId,
    pub text: String,
    /// Identifies this request's actions (audit, undo); made by the caller, e.g. from the job.
    pub action_id: ActionId,
    /// The user's attachments, stored by reference; the model sees them after the text.
    pub attachments: Vec<transcript::MediaRef>,
    /// Lines the model sees after the user's words (an attachment that could not be read); the
    /// visible transcript keeps only the words.
    pub attachment_notes: Vec<String>,
    /// The button the user pressed, when the message is a press (its title is `text`). A
    /// press of the server's confirmation buttons decides a held call without the model.
    pub button_id: Option<String>,
    /// When Bridle received the message (Unix ms), where known: a typed yes received before
    /// the reply asking the question was written confirms nothing
    /// ([`Answer::unless_sent_before_asked`](crate::Answer::unless_sent_before_asked)).
    pub sent_at_ms: Option<i64>,
    /// Whether a typed yes can confirm a held call on this message's channel (SMS: no, only a
    /// reply with the question's code, which arrives as the press).
    pub typed_yes: crate::TypedYes,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEnd {
    /// The model answered.
    Answered,
    /// The answer hit the output limit; the user was told.
    CutOff,
    /// Refusal, content filter or guardrail.
    Declined,
    /// The context window is full.
    ContextTooLong,
    /// The model produced something unusable (malformed tool use, unknown stop).
    Muddled,
    /// The model↔tool round-trip ceiling was reached.
    CycleLimit,
    /// The provider failed; the user got a calm sentence.
    BackendFailed,
    /// A guard (budget, rate) refused the model call.
    Denied,
    /// The conversation is paused (an operator took over); nothing was generated.
    Paused,
    /// The server stopped before the turn could start; the message is kept and answered
    /// after the restart (only ever sent to a waiting web chat stream).
    Interrupted,
    /// The attempt failed under the server (its store); the message is kept and its job tried
    /// again by itself (only ever sent to a waiting web chat stream).
    Retrying,
    /// A later message's turn began after this one's (a dead letter sent again once newer
    /// messages were answered): nothing was written, and there is nothing to deliver. That
    /// turn had this one's message in its history.
    Overtaken,
}

/// What the turn produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub end: TurnEnd,
    /// The reply to deliver: everything the assistant said in this turn, markers stripped.
    pub reply: String,
    /// Buttons to offer with the reply: the server's Yes / No when a call was held for
    /// confirmation (they win over the model's), else those of a `<buttons>` marker.
    pub buttons: Vec<crate::ShapedButton>,
    /// The model asked to answer with a reaction only (`<silent/>`).
    pub silent: bool,
    /// The model calls the turn made (a call a guard refused was not made).
    pub model_calls: u32,
    /// The model calls this run made (fewer than `model_calls` when it resumed a turn that a
    /// crash cut short).
    pub new_model_calls: u32,
    /// This run resumed a turn an earlier attempt had started.
    pub resumed: bool,
    pub usage: Usage,
    /// Tool calls of this turn whose result was an error (bad arguments, domain or internal
    /// failures, unknown tools) — for metrics.
    pub tool_errors: u32,
    /// The conversation's turn number this outcome is of (what its visible entries carry), so
    /// the caller delivering it need not read the conversation again.
    pub turn: u64,
    /// Where the reply's visible entry goes, when this run wrote the user's entry itself (a
    /// new turn, not a resumed one): nothing but this turn's reply can follow it, so whoever
    /// delivers it need not read the visible transcript. `None`: an earlier attempt may have
    /// recorded more; read it.
    pub reply_position: Option<u64>,
}

/// The harness core: holds the model, the tools, the store and the guard.
pub struct Engine {
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) tools: Arc<Registry>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) guard: Arc<dyn Guard>,
    pub(crate) context: Option<Arc<dyn ContextSource>>,
    pub(crate) lean: Arc<Lean>,
    pub(crate) specs: Arc<crate::specs::ToolSpecs>,
    pub(crate) clock: Clock,
    pub(crate) options: EngineOptions,
    pub(crate) confirmation: Option<Arc<crate::ConfirmationGate>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("model", &self.model.name())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Engine {
    pub fn new(
        model: Arc<dyn ChatModel>,
        tools: Arc<Registry>,
        store: Arc<dyn Store>,
        options: EngineOptions,
    ) -> Self {
        Self {
            model,
            tools,
            store,
            guard: Arc::new(AllowAll),
            context: None,
            lean: Arc::new(Lean::default()),
            specs: Arc::default(),
            clock: Arc::new(now_ms),
            options,
            confirmation: None,
        }
    }

    /// Open every user message with a `<context>` block built from `source`, fresh each turn
    /// and stored verbatim.
    pub fn with_context(mut self, source: Arc<dyn ContextSource>) -> Self {
        self.context = Some(source);
        self
    }

    /// The context block's facts for `user` in `conversation`, as a new turn there reads them
    /// (`None`: this engine opens no message with a block). For a caller that can read them
    /// beside the turn's start and hand them in with [`TurnRead::facts`].
    pub async fn context_facts(
        &self,
        user: &UserId,
        conversation: &ConversationId,
    ) -> Option<Result<crate::ContextFacts, String>> {
        let source = self.context.as_ref()?;
        Some(source.facts(user, conversation).await)
    }

    /// The clock the context block and the stored rows use.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The optional features this process has stopped using.
    pub fn lean(&self) -> &Lean {
        &self.lean
    }

    /// The request for `messages`: the frozen prefix (model, system prompt, `tools`), the
    /// settings less what the provider refused, and `required` tool choice only on a user's
    /// message — after tool results the model must be free to answer, or it would call tools
    /// until the cycle limit. One place for the turn loop and `bridle eval`'s replay.
    pub(crate) fn request_for(
        &self,
        messages: Vec<backend::ChatMessage>,
        tools: Arc<[backend::ToolSpec]>,
    ) -> backend::ChatRequest {
        let o = &self.options;
        let mut settings = o.settings.clone();
        self.lean.apply(&mut settings);
        let after_tools = messages.last().is_some_and(|m| {
            m.parts
                .iter()
                .any(|p| matches!(p, transcript::Part::ToolResult { .. }))
        });
        if after_tools && settings.tool_choice == backend::ToolChoice::Required {
            settings.tool_choice = backend::ToolChoice::Auto;
        }
        backend::ChatRequest {
            model: o.model_id.clone(),
            system: o.system_prompt.clone(),
            messages,
            tools,
            settings,
        }
    }

    /// Put a guard (budgets, rate limits) in front of every model call.
    pub fn with_guard(mut self, guard: Arc<dyn Guard>) -> Self {
        self.guard = guard;
        self
    }

    /// Whether this engine's guard would refuse the first model call of a turn starting from
    /// `read` even before the conversation is in it ([`Guard::refuses_outright`]): a read only,
    /// for a caller about to prepare a costly turn (fetching attachments). The turn, if run,
    /// is guarded call by call as ever.
    pub async fn refuses_outright(&self, read: &TurnRead) -> Option<crate::Denied> {
        let request = self.request_for(Vec::new(), Arc::from([]));
        let call = crate::GuardCall {
            conversation: &read.conversation,
            call_number: 1,
            request: &request,
            account: read.account.as_ref().and_then(Option::as_ref),
        };
        self.guard.refuses_outright(&call).await
    }

    /// Count `segments` text-message segments a platform billed for a reply in `conversation`
    /// against the budget ([`Guard::charge_segments`]).
    pub async fn charge_segments(
        &self,
        user: Option<&UserId>,
        conversation: &ConversationId,
        segments: u32,
    ) {
        if segments > 0 {
            self.guard
                .charge_segments(user, conversation, segments)
                .await;
        }
    }

    /// Whether a dollar cap that a reply's fees count in is full ([`Guard::fees_over_cap`]).
    pub async fn fees_over_cap(&self, user: Option<&UserId>) -> Result<bool, EngineError> {
        Ok(self.guard.fees_over_cap(user).await?)
    }

    /// Answer one user message. Model and tool failures end in a reply; `Err` means storage
    /// failed (or the conversation is unknown) and the job should be retried. The user's words
    /// go into the visible transcript here; the reply's entry is written by whoever delivers it
    /// (the job path in `channel-jobs`), so it records what actually reached the user.
    pub async fn run_turn(
        &self,
        input: TurnInput,
        sink: &dyn EventSink,
    ) -> Result<TurnOutcome, EngineError> {
        self.run(None, input, sink).await
    }

    /// [`Engine::run_turn`] in a conversation as the caller just read it while holding the
    /// conversation's lease (so no other turn can have moved it on since), which saves the
    /// turn reading it again (and its user's account, when read with it).
    pub async fn run_turn_in(
        &self,
        read: TurnRead,
        input: TurnInput,
        sink: &dyn EventSink,
    ) -> Result<TurnOutcome, EngineError> {
        self.run(Some(read), input, sink).await
    }

    async fn run(
        &self,
        read: Option<TurnRead>,
        input: TurnInput,
        sink: &dyn EventSink,
    ) -> Result<TurnOutcome, EngineError> {
        let span = tracing::info_span!("turn", conversation = %input.conversation_id, action_id = %input.action_id);
        // Every tool shown gets a result or `tool_not_run`, however the turn ends.
        let sink = OpenTools::new(sink);
        let outcome = async {
            let mut turn = Turn::start(self, read, &input, &sink)
                .instrument(crate::spans::context_build())
                .await?;
            let end = turn.run().await?;
            turn.finish(end).await
        }
        .instrument(span)
        .await;
        sink.resolve();
        outcome
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
