use crate::call::{Limits, Shown, Streamed, stream_call};
use crate::compact;
use crate::context::{self, ContextFacts, ContextSource};
use crate::history::History;
use crate::lean::Lean;
use crate::resume::{self, Next, tool_calls};
use crate::{
    AllowAll, EngineError, EngineOptions, EventSink, Guard, GuardCall, NullSink, TurnEvent, lines,
};
use crate::{CallReport, Clock};
use backend::{BackendError, ChatModel, ChatRequest, ToolSpec};
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::{Store, VisibleEntry, VisibleRole};
use tools::{ActionId, Actor, Ctx, Registry, ToolCall};
use tracing::Instrument;
use transcript::{
    CallRecord, Conversation, ConversationId, ConversationStatus, Message, Part, Role, StopReason,
    Usage,
};

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
}

/// What the turn produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub end: TurnEnd,
    /// The reply to deliver: everything the assistant said in this turn, markers stripped.
    pub reply: String,
    /// Buttons to offer with the reply (from a `<buttons>` marker).
    pub buttons: Vec<crate::ShapedButton>,
    /// The model asked to answer with a reaction only (`<silent/>`).
    pub silent: bool,
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
}

/// The harness core: holds the model, the tools, the store and the guard.
pub struct Engine {
    model: Arc<dyn ChatModel>,
    tools: Arc<Registry>,
    pub(crate) store: Arc<dyn Store>,
    guard: Arc<dyn Guard>,
    context: Option<Arc<dyn ContextSource>>,
    lean: Arc<Lean>,
    pub(crate) clock: Clock,
    options: EngineOptions,
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

    /// The clock the context block and the stored rows use.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The optional features this process has stopped using.
    pub fn lean(&self) -> &Lean {
        &self.lean
    }

    /// Put a guard (budgets, rate limits) in front of every model call.
    pub fn with_guard(mut self, guard: Arc<dyn Guard>) -> Self {
        self.guard = guard;
        self
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
        let span = tracing::info_span!("turn", conversation = %input.conversation_id, action_id = %input.action_id);
        async move {
            let mut turn = Turn::start(self, &input, sink).await?;
            let end = turn.run().await?;
            turn.finish(end).await
        }
        .instrument(span)
        .await
    }
}

/// The state of one running turn.
struct Turn<'a> {
    engine: &'a Engine,
    sink: &'a dyn EventSink,
    conv: Conversation,
    ctx: Ctx,
    history: History,
    next_position: u64,
    next_visible: u64,
    tools: Arc<[ToolSpec]>,
    shown: Shown,
    model_calls: u32,
    usage: Usage,
    /// Written on every message of this turn, so a retried job can find them.
    action_id: String,
    /// Where a resumed turn picks up (`None` for a new turn).
    resume: Option<Next>,
    /// The provider rejected replayed reasoning: send history without it for the rest of the turn.
    strip_reasoning: bool,
    /// What the user's message says to a pending confirmation.
    answer: crate::Answer,
    /// Model calls an earlier attempt of this turn made (a resumed turn).
    calls_before: u32,
    resumed: bool,
    tool_errors: u32,
}

/// Where the answer that asked for tools is stored, and whether the turn is resuming (only then
/// can some of its calls have recorded results).
#[derive(Debug, Clone, Copy)]
struct Asked {
    at: u64,
    resumed: bool,
}

/// What the loop does after an answer that asked for tools.
enum Flow {
    /// The tools ran: call the model again.
    Continue,
    /// The turn is over.
    End(TurnEnd),
    /// The calls were answered as not executed; the stop reason decides the end.
    Conclude,
}

impl<'a> Turn<'a> {
    async fn start(
        engine: &'a Engine,
        input: &TurnInput,
        sink: &'a dyn EventSink,
    ) -> Result<Turn<'a>, EngineError> {
        let store = &engine.store;
        let id = &input.conversation_id;
        let mut conv = store
            .conversation(id)
            .await?
            .ok_or_else(|| EngineError::ConversationNotFound(id.clone()))?;
        let history = store.messages(id, conv.segment).await?;
        let resumed = resume::find(&history, &input.action_id.0);
        // The user's message before this one: only a call held on it can be confirmed now.
        let previous_action = history
            .iter()
            .rev()
            .filter(|m| m.role == Role::User)
            .filter_map(|m| m.action_id.as_deref())
            .find(|a| *a != input.action_id.0)
            .map(str::to_owned);
        let answer = crate::Answer::from_text(&input.text, previous_action);
        if resumed.is_none() {
            conv.turn += 1;
            if conv.prompt_version != engine.options.prompt_version {
                if !conv.prompt_version.is_empty() {
                    tracing::info!(from = %conv.prompt_version, to = %engine.options.prompt_version, "system prompt version changed");
                }
                conv.prompt_version = engine.options.prompt_version.clone();
            }
            store.update_conversation(&conv).await?;
        }
        let next_position = store.next_position(id).await?;
        let next_visible = store.next_visible_position(id).await?;
        let tools = engine
            .tools
            .catalog_for(&conv.purpose)
            .into_iter()
            .map(|d| ToolSpec {
                name: d.name.clone(),
                description: d.description.clone(),
                input_schema: d.input_schema.clone(),
            })
            .collect();
        let ctx = Ctx {
            user_id: conv.user_id.clone(),
            actor: Actor::Agent,
            action_id: input.action_id.clone(),
            conversation_id: id.clone(),
            call_key: None,
        };
        let mut turn = Turn {
            engine,
            sink,
            conv,
            ctx,
            history: History::new(history),
            next_position,
            next_visible,
            tools,
            shown: Shown::default(),
            model_calls: 0,
            usage: Usage::default(),
            action_id: input.action_id.0.clone(),
            resume: None,
            strip_reasoning: false,
            answer,
            calls_before: 0,
            resumed: false,
            tool_errors: 0,
        };
        match resumed {
            None => {
                turn.compact_if_needed().await?;
                let text = turn.user_message_text(&input.model_text()).await;
                turn.append(Role::User, input.user_parts(text), None)
                    .await?;
                turn.append_visible(VisibleRole::User, input.text.clone())
                    .await?;
            }
            Some(r) => {
                tracing::warn!(calls_made = r.calls_made, next = ?r.next, "resuming a turn that was cut short");
                turn.model_calls = r.calls_made;
                turn.calls_before = r.calls_made;
                turn.resumed = true;
                turn.shown.restore(r.shown);
                turn.resume = Some(r.next);
                // The worker may have died between the transcript and the visible record.
                let visible = store.visible(id).await?;
                let this_turn = |role| {
                    visible
                        .iter()
                        .any(|e| e.turn == turn.conv.turn && e.role == role)
                };
                if !this_turn(VisibleRole::User) {
                    turn.append_visible(VisibleRole::User, input.text.clone())
                        .await?;
                }
            }
        }
        Ok(turn)
    }

    /// The loop: at most `max_cycles` model calls, each followed by its tools.
    async fn run(&mut self) -> Result<TurnEnd, EngineError> {
        if self.conv.status != ConversationStatus::Active {
            tracing::info!(status = ?self.conv.status, "conversation not active; no reply");
            return Ok(TurnEnd::Paused);
        }
        let mut cycle = self.model_calls;
        match self.resume.take() {
            Some(Next::Finished) => return Ok(TurnEnd::Answered),
            Some(Next::Tools { calls, asked_at }) => {
                let asked = Asked {
                    at: asked_at,
                    resumed: true,
                };
                match self
                    .handle_calls(&calls, &StopReason::ToolUse, cycle, asked)
                    .await?
                {
                    Flow::Continue => {}
                    Flow::End(end) => return Ok(end),
                    Flow::Conclude => return self.conclude(StopReason::ToolUse, true).await,
                }
            }
            Some(Next::Model) | None => {}
        }
        loop {
            cycle += 1;
            let mut acc = Streamed::default();
            let started = tokio::time::Instant::now();
            let result = match self.call_with_retry(&mut acc).await {
                Ok(result) => result,
                Err(denied) => {
                    tracing::warn!(reason = %denied.reason, "model call denied by guard");
                    self.say(&denied.user_message).await?;
                    return Ok(TurnEnd::Denied);
                }
            };
            let latency_ms = started.elapsed().as_millis() as u64;
            let (stop, usage) = match result {
                Ok(done) => done,
                Err(err) => return self.backend_failed(err, acc, latency_ms).await,
            };
            self.usage += usage;
            let calls = tool_calls(&acc.parts);
            let record = self.call_record(Some(stop.clone()), None, usage, latency_ms);
            self.append(Role::Assistant, acc.parts, Some(record))
                .await?;
            if !calls.is_empty() {
                let asked = Asked {
                    at: self.next_position - 1,
                    resumed: false,
                };
                match self.handle_calls(&calls, &stop, cycle, asked).await? {
                    Flow::Continue => continue,
                    Flow::End(end) => return Ok(end),
                    Flow::Conclude => {}
                }
            }
            return self.conclude(stop, !calls.is_empty()).await;
        }
    }

    /// Run the calls of an answer, or answer them as not executed when the answer was cut off
    /// or the ceiling is reached.
    async fn handle_calls(
        &mut self,
        calls: &[ToolCall],
        stop: &StopReason,
        cycle: u32,
        asked: Asked,
    ) -> Result<Flow, EngineError> {
        let max_cycles = self.engine.options.max_cycles.max(1);
        let runnable = matches!(
            stop,
            StopReason::ToolUse | StopReason::EndTurn | StopReason::StopSequence
        );
        if runnable && cycle < max_cycles {
            self.run_tools(calls, asked).await?;
            return Ok(Flow::Continue);
        }
        let why = if runnable {
            "NOT EXECUTED: the step limit for this message was reached. Do not call tools again; tell the user where things stand.".to_owned()
        } else {
            format!(
                "NOT EXECUTED: your response ended ({}) before this call could run.",
                stop.as_str()
            )
        };
        self.not_executed(calls, &why).await?;
        if runnable {
            tracing::warn!(cycles = cycle, "cycle ceiling reached");
            self.say(lines::CYCLE_LIMIT).await?;
            return Ok(Flow::End(TurnEnd::CycleLimit));
        }
        Ok(Flow::Conclude)
    }

    /// Map the final stop reason to an outcome, adding a line where the user needs one.
    async fn conclude(
        &mut self,
        stop: StopReason,
        had_calls: bool,
    ) -> Result<TurnEnd, EngineError> {
        let (end, line) = match &stop {
            StopReason::EndTurn | StopReason::StopSequence => (TurnEnd::Answered, None),
            StopReason::ToolUse if had_calls => (TurnEnd::Answered, None),
            StopReason::ToolUse | StopReason::MalformedToolUse => {
                (TurnEnd::Muddled, Some(lines::MUDDLED))
            }
            StopReason::MaxTokens => (TurnEnd::CutOff, Some(lines::CUT_OFF)),
            StopReason::Refusal | StopReason::ContentFiltered | StopReason::Guardrail => {
                let line = (!self.last_call_had_text()).then_some(lines::DECLINED);
                (TurnEnd::Declined, line)
            }
            StopReason::ContextWindowExceeded => (TurnEnd::ContextTooLong, Some(lines::TOO_LONG)),
            StopReason::Other(raw) => {
                tracing::warn!(stop_reason = %raw, "unknown stop reason");
                if self.last_call_had_text() {
                    (TurnEnd::Answered, None)
                } else {
                    (TurnEnd::Muddled, Some(lines::MUDDLED))
                }
            }
        };
        if let Some(line) = line {
            self.say(line).await?;
        }
        Ok(end)
    }

    fn last_call_had_text(&self) -> bool {
        self.history.last_row_had_text()
    }

    /// One model call. When it failed before anything was streamed, it is tried again: once
    /// without replayed reasoning if the provider rejected it, once without each optional
    /// feature the provider refused (lean mode), and once after a transient failure.
    /// The outer `Err` is a guard denial.
    async fn call_with_retry(
        &mut self,
        acc: &mut Streamed,
    ) -> Result<Result<(StopReason, Usage), BackendError>, crate::Denied> {
        let mut retried = false;
        loop {
            let err = match self.call_once(acc).await? {
                Err(err) if !acc.emitted => err,
                other => return Ok(other),
            };
            match &err {
                BackendError::ReasoningRejected { .. } if !self.strip_reasoning => {
                    tracing::warn!(error = %err, "replayed reasoning rejected; retrying without it");
                    self.strip_reasoning = true;
                }
                BackendError::FeatureRejected { feature, .. }
                    if !self.engine.lean.dropped(*feature) =>
                {
                    if self.engine.lean.drop_feature(*feature) {
                        tracing::warn!(?feature, error = %err, "the provider refused an optional feature; lean mode from now on");
                    }
                }
                _ if err.is_retryable() && !retried => {
                    retried = true;
                    let wait = match &err {
                        BackendError::Throttled {
                            retry_after: Some(d),
                        } => *d,
                        _ => Duration::from_millis(250),
                    };
                    if wait > self.engine.options.max_retry_wait {
                        return Ok(Err(err));
                    }
                    tracing::warn!(error = %err, kind = err.kind(), "model call failed before streaming; retrying once");
                    tokio::time::sleep(wait).await;
                }
                _ => return Ok(Err(err)),
            }
            *acc = Streamed::default();
        }
    }

    async fn call_once(
        &mut self,
        acc: &mut Streamed,
    ) -> Result<Result<(StopReason, Usage), BackendError>, crate::Denied> {
        let engine = self.engine;
        let request = self.request();
        self.model_calls += 1;
        let guard_call = GuardCall {
            conversation: &self.conv,
            call_number: self.model_calls,
            request: &request,
        };
        let permit = engine.guard.before_model_call(&guard_call).await?;
        self.shown.close_block();
        let limits = Limits {
            call_timeout: engine.options.call_timeout,
            idle_timeout: engine.options.idle_timeout,
        };
        let result = stream_call(
            engine.model.as_ref(),
            request,
            limits,
            self.sink,
            &mut self.shown,
            acc,
        )
        .await;
        let report = CallReport {
            usage: result.as_ref().map(|(_, u)| *u).unwrap_or_default(),
            failed: result.is_err(),
            streamed: acc.emitted || !acc.parts.is_empty(),
            streamed_chars: streamed_chars(&acc.parts),
        };
        engine.guard.settle(&self.conv, permit, &report).await;
        Ok(result)
    }

    fn request(&self) -> ChatRequest {
        let o = &self.engine.options;
        let mut settings = o.settings.clone();
        self.engine.lean.apply(&mut settings);
        let messages = if self.strip_reasoning {
            self.history.chat_without_reasoning()
        } else {
            self.history.chat()
        };
        ChatRequest {
            model: o.model_id.clone(),
            system: o.system_prompt.clone(),
            messages,
            tools: self.tools.clone(),
            settings,
        }
    }

    /// The user's message as stored and sent: with the context block when the engine has a
    /// context source, else the words alone.
    async fn user_message_text(&self, text: &str) -> String {
        let Some(source) = &self.engine.context else {
            return text.to_owned();
        };
        let facts = source.facts(&self.conv).await.unwrap_or_else(|err| {
            tracing::warn!(error = %err, "context facts unavailable; the block has time and channel only");
            ContextFacts::default()
        });
        context::render(&facts, &self.conv, (self.engine.clock)(), text)
    }

    /// When the current segment is past the threshold, ask the model for notes and continue in
    /// a new segment that opens with them. Any failure leaves the history as it was.
    async fn compact_if_needed(&mut self) -> Result<(), EngineError> {
        let engine = self.engine;
        let o = &engine.options;
        let chars = compact::content_chars(self.history.messages());
        if chars <= o.compaction_threshold_chars {
            return Ok(());
        }
        let next_segment = self.conv.segment + 1;
        // A crash after the notes were written but before the conversation moved on: reuse them.
        let written = engine.store.messages(&self.conv.id, next_segment).await?;
        if !written.is_empty() {
            self.conv.segment = next_segment;
            engine.store.update_conversation(&self.conv).await?;
            self.history = History::new(written);
            return Ok(());
        }
        let request = compact::notes_request(
            &o.model_id,
            self.history.messages(),
            o.compaction_max_tokens,
        );
        self.model_calls += 1;
        let call = GuardCall {
            conversation: &self.conv,
            call_number: self.model_calls,
            request: &request,
        };
        let permit = match engine.guard.before_model_call(&call).await {
            Ok(permit) => permit,
            Err(denied) => {
                tracing::warn!(reason = %denied.reason, "compaction skipped: guard denied the call");
                return Ok(());
            }
        };
        let limits = Limits {
            call_timeout: o.call_timeout,
            idle_timeout: o.idle_timeout,
        };
        let started = tokio::time::Instant::now();
        let mut acc = Streamed::default();
        let result = stream_call(
            engine.model.as_ref(),
            request,
            limits,
            &NullSink,
            &mut Shown::default(),
            &mut acc,
        )
        .await;
        let report = CallReport {
            usage: result.as_ref().map(|(_, u)| *u).unwrap_or_default(),
            failed: result.is_err(),
            streamed: acc.emitted || !acc.parts.is_empty(),
            streamed_chars: streamed_chars(&acc.parts),
        };
        engine.guard.settle(&self.conv, permit, &report).await;
        let (stop, usage) = match result {
            Ok(done) => done,
            Err(err) => {
                tracing::warn!(error = %err, kind = err.kind(), chars, "compaction failed; carrying on with the full history");
                return Ok(());
            }
        };
        self.usage += usage;
        let notes: String = acc.parts.iter().filter_map(Part::as_text).collect();
        if notes.trim().is_empty() || !matches!(stop, StopReason::EndTurn | StopReason::MaxTokens) {
            tracing::warn!(
                stop_reason = stop.as_str(),
                chars,
                "compaction produced no notes; carrying on with the full history"
            );
            return Ok(());
        }
        let mut record = self.call_record(
            Some(stop),
            None,
            usage,
            started.elapsed().as_millis() as u64,
        );
        record.tools_offered.clear();
        self.conv.segment = next_segment;
        self.history = History::default();
        self.append(
            Role::User,
            vec![Part::text(compact::notes_message_text(&notes))],
            Some(record),
        )
        .await?;
        engine.store.update_conversation(&self.conv).await?;
        tracing::info!(
            segment = next_segment,
            chars,
            "compacted into a new segment"
        );
        Ok(())
    }

    /// Log the raw error; record and show what the user saw plus a calm sentence.
    async fn backend_failed(
        &mut self,
        err: BackendError,
        acc: Streamed,
        latency_ms: u64,
    ) -> Result<TurnEnd, EngineError> {
        tracing::error!(error = %err, kind = err.kind(), streamed = acc.emitted, "model call failed");
        let line = match err {
            BackendError::Throttled { .. } => lines::THROTTLED,
            BackendError::Overloaded => lines::OVERLOADED,
            BackendError::Timeout { .. } => lines::TIMED_OUT,
            _ => lines::BACKEND_FAILED,
        };
        let mut parts = acc.visible_parts();
        let shown_line = self.shown.show_line(line);
        parts.push(Part::text(shown_line.trim_start()));
        let record = self.call_record(None, Some(err.kind()), Usage::default(), latency_ms);
        self.append(Role::Assistant, parts, Some(record)).await?;
        self.sink.emit(TurnEvent::Error {
            message: line.to_owned(),
        });
        Ok(TurnEnd::BackendFailed)
    }

    /// Run the calls one after another, recording each result the moment the call finishes
    /// (DESIGN invariant 10), then write them together as one tool message. A resumed turn
    /// reuses the results already recorded and runs only the calls that never finished.
    /// Crash story: a crash between a tool's effect and its result record repeats that one
    /// call on resume; a crash after the record repeats nothing.
    async fn run_tools(&mut self, calls: &[ToolCall], asked: Asked) -> Result<(), EngineError> {
        let engine = self.engine;
        let store = &engine.store;
        let mut stored = if asked.resumed {
            store.tool_results(&self.conv.id, asked.at).await?
        } else {
            Default::default()
        };
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            if let Some(part) = stored.remove(&call.id) {
                let is_error = matches!(part, Part::ToolResult { is_error: true, .. });
                tracing::info!(tool = %call.name, call = %call.id, "reusing the result recorded before the interruption");
                self.sink.emit(TurnEvent::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    is_error,
                });
                results.push(part);
                continue;
            }
            let ctx = Ctx {
                call_key: Some(format!("{}#{}#{}", self.conv.id, asked.at, call.id)),
                ..self.ctx.clone()
            };
            let outcome = match engine.hold_for_confirmation(&ctx, call, &self.answer).await {
                Some(held) => held,
                None => engine.tools.run(&ctx, &self.conv.purpose, call).await,
            };
            let mut outcome = outcome;
            match store
                .put_tool_result(&self.conv.id, asked.at, &call.id, &outcome.part)
                .await
            {
                Ok(()) => {}
                // Recorded by an attempt that was still running: the first record stands.
                Err(store::StoreError::Conflict { .. }) => {
                    tracing::warn!(tool = %call.name, call = %call.id, "a result was already recorded for this call");
                    let mut recorded = store.tool_results(&self.conv.id, asked.at).await?;
                    if let Some(part) = recorded.remove(&call.id) {
                        outcome.part = part;
                    }
                }
                Err(e) => return Err(e.into()),
            }
            self.sink.emit(TurnEvent::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                is_error: outcome.is_error,
            });
            self.tool_errors += u32::from(outcome.is_error);
            if let Some(effects) = outcome.effects {
                self.sink.emit(TurnEvent::Effects {
                    tool: call.name.clone(),
                    effects,
                });
            }
            results.push(outcome.part);
        }
        self.append(Role::Tool, results, None).await
    }

    /// Answer calls that will not run, so the transcript stays valid for replay.
    async fn not_executed(&mut self, calls: &[ToolCall], why: &str) -> Result<(), EngineError> {
        let results = calls
            .iter()
            .map(|c| Part::ToolResult {
                tool_use_id: c.id.clone(),
                content: json!({ "error": why }),
                is_error: true,
            })
            .collect();
        self.append(Role::Tool, results, None).await
    }

    /// A line from the harness itself: shown, and recorded as an assistant message.
    async fn say(&mut self, line: &str) -> Result<(), EngineError> {
        let shown = self.shown.show_line(line);
        self.sink.emit(TurnEvent::Token {
            text: shown.clone(),
        });
        self.append(Role::Assistant, vec![Part::text(shown.trim_start())], None)
            .await
    }

    async fn finish(mut self, mut end: TurnEnd) -> Result<TurnOutcome, EngineError> {
        if end == TurnEnd::Answered && self.shown.text.trim().is_empty() {
            self.say(lines::EMPTY).await?;
            end = TurnEnd::Muddled;
        }
        let shaped = crate::shape(&self.shown.text);
        let marked = shaped.text != self.shown.text || !shaped.buttons.is_empty() || shaped.silent;
        // A silent reply has no reaction in the web chat: it shows a short acknowledgement.
        let shown = if shaped.text.is_empty() && shaped.silent {
            lines::ACKNOWLEDGED.to_owned()
        } else {
            shaped.text.clone()
        };
        if marked {
            self.sink.emit(TurnEvent::Shaped {
                text: shown.clone(),
                buttons: shaped.buttons.clone(),
            });
        }
        self.sink.emit(TurnEvent::Done { end });
        tracing::info!(?end, model_calls = self.model_calls, "turn finished");
        Ok(TurnOutcome {
            end,
            reply: shaped.text,
            buttons: shaped.buttons,
            silent: shaped.silent,
            model_calls: self.model_calls,
            new_model_calls: self.model_calls - self.calls_before,
            resumed: self.resumed,
            usage: self.usage,
            tool_errors: self.tool_errors,
        })
    }

    fn call_record(
        &self,
        stop_reason: Option<StopReason>,
        error: Option<&str>,
        usage: Usage,
        latency_ms: u64,
    ) -> CallRecord {
        CallRecord {
            backend: self.engine.model.name().to_owned(),
            model: self.engine.options.model_id.clone(),
            stop_reason,
            error: error.map(str::to_owned),
            usage,
            latency_ms,
            tools_offered: self.tools.iter().map(|t| t.name.clone()).collect(),
        }
    }

    async fn append(
        &mut self,
        role: Role,
        parts: Vec<Part>,
        call: Option<CallRecord>,
    ) -> Result<(), EngineError> {
        let message = Message {
            conversation_id: self.conv.id.clone(),
            segment: self.conv.segment,
            position: self.next_position,
            role,
            parts,
            call,
            action_id: Some(self.action_id.clone()),
            created_at_ms: (self.engine.clock)(),
        };
        self.engine.store.append_message(&message).await?;
        self.next_position += 1;
        self.history.push(message);
        Ok(())
    }

    /// The user's entry in the visible transcript. The reply's entry is the job path's: it
    /// records what was actually delivered (`channel-jobs`).
    async fn append_visible(&mut self, role: VisibleRole, text: String) -> Result<(), EngineError> {
        let entry = VisibleEntry {
            conversation_id: self.conv.id.clone(),
            position: self.next_visible,
            role,
            text,
            buttons: Vec::new(),
            reaction: None,
            turn: self.conv.turn,
            created_at_ms: (self.engine.clock)(),
        };
        self.engine.store.append_visible(&entry).await?;
        self.next_visible += 1;
        Ok(())
    }
}

/// Characters of output in streamed parts: what a provider bills as output tokens, roughly.
fn streamed_chars(parts: &[Part]) -> usize {
    parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => text.chars().count(),
            Part::ToolUse { input, name, .. } => transcript::json_chars(input) + name.len(),
            other => transcript::json_chars(other),
        })
        .sum()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
