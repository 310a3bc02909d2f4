//! A model that plays a script. It is real code, used by tests, benchmarks and the local server's
//! `scripted` backend, so every loop behaviour can be exercised without a network.

use crate::{BackendError, ChatModel, ChatRequest, EventStream, ModelEvent, ReasoningDelta};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use transcript::{StopReason, Usage};

/// One step of a scripted response stream.
#[derive(Debug, Clone)]
pub enum Step {
    /// Yield this event.
    Event(ModelEvent),
    /// Yield this error and end the stream.
    Fail(BackendError),
    /// Never yield anything again (a stalled connection).
    Stall,
    /// Wait this long before the next step.
    Delay(Duration),
    /// Yield `done` with this stop reason and the reply's usage.
    Done(StopReason),
}

/// One scripted model response: either a failure to open the stream, or a list of steps.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    open_error: Option<BackendError>,
    steps: Vec<Step>,
    /// Explicit usage for `done`; otherwise estimated from what was said.
    usage: Option<Usage>,
    output_tokens: u64,
    /// Report the request's whole `max_tokens` as output.
    spends_max_tokens: bool,
}

impl Reply {
    /// An empty reply; add steps with the builder methods.
    pub fn new() -> Self {
        Self::default()
    }

    /// A plain answer streamed word by word, ending the turn.
    pub fn text(text: &str) -> Self {
        Self::new().say(text).stop(StopReason::EndTurn)
    }

    /// One tool call, stopping for tool use.
    pub fn tool_call(id: &str, name: &str, input: Value) -> Self {
        Self::new().call(id, name, input).stop(StopReason::ToolUse)
    }

    /// The call fails before any event (e.g. HTTP 429 on connect).
    pub fn error(err: BackendError) -> Self {
        Self {
            open_error: Some(err),
            ..Self::default()
        }
    }

    /// Stream `text` as word-sized text events (spaces kept, so the pieces join back exactly).
    pub fn say(mut self, text: &str) -> Self {
        for token in text.split_inclusive(' ') {
            self.output_tokens += 1;
            self.steps.push(Step::Event(ModelEvent::text(token)));
        }
        self
    }

    /// Stream reasoning text followed by its signature.
    pub fn reason(mut self, text: &str, signature: &str) -> Self {
        self.steps.push(Step::Event(ModelEvent::Reasoning {
            delta: ReasoningDelta::Text(text.to_owned()),
        }));
        self.steps.push(Step::Event(ModelEvent::Reasoning {
            delta: ReasoningDelta::Signature(signature.to_owned()),
        }));
        self
    }

    /// Stream one redacted reasoning blob.
    pub fn redacted_reasoning(mut self, data: &[u8]) -> Self {
        self.steps.push(Step::Event(ModelEvent::Reasoning {
            delta: ReasoningDelta::Redacted(data.to_vec()),
        }));
        self
    }

    /// Request a tool call.
    pub fn call(mut self, id: &str, name: &str, input: Value) -> Self {
        self.output_tokens += 5;
        self.steps.push(Step::Event(ModelEvent::ToolUse {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
        }));
        self
    }

    /// Replace the usage reported in the `done` event (by default: 10 input tokens, and one
    /// output token per word said, five per tool call).
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Report the request's whole `max_tokens` as output tokens (the other kinds as set by
    /// [`Reply::usage`]): the most a call may cost, which a budget must reserve for.
    pub fn spending_max_tokens(mut self) -> Self {
        self.spends_max_tokens = true;
        self
    }

    /// End the stream with `done` and this stop reason.
    pub fn stop(mut self, stop_reason: StopReason) -> Self {
        self.steps.push(Step::Done(stop_reason));
        self
    }

    /// Fail mid-stream with `err` (after whatever was added so far).
    pub fn then_fail(mut self, err: BackendError) -> Self {
        self.steps.push(Step::Fail(err));
        self
    }

    /// Stall mid-stream: no further event ever arrives.
    pub fn then_stall(mut self) -> Self {
        self.steps.push(Step::Stall);
        self
    }

    /// A keep-alive (bytes with no content, like an SSE `: ping` comment).
    pub fn keep_alive(mut self) -> Self {
        self.steps.push(Step::Event(ModelEvent::KeepAlive));
        self
    }

    /// Pause before the next step.
    pub fn then_wait(mut self, d: Duration) -> Self {
        self.steps.push(Step::Delay(d));
        self
    }

    /// The steps this reply will play.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
}

/// How many of the latest requests a [`ScriptedModel`] keeps unless told otherwise.
pub const KEPT_REQUESTS: usize = 64;

/// Plays [`Reply`]s in order, one per call, and records the requests it receives: the latest
/// [`KEPT_REQUESTS`] (see [`ScriptedModel::keeping`]) and a count of all, so a server running it
/// for hours does not grow per turn.
#[derive(Debug)]
pub struct ScriptedModel {
    replies: Mutex<VecDeque<Reply>>,
    /// When set, the script starts over once it runs out.
    cycle: Option<Vec<Reply>>,
    requests: Mutex<Requests>,
}

/// The latest requests (at most `keep`), oldest first, and how many arrived in all.
#[derive(Debug)]
struct Requests {
    kept: VecDeque<ChatRequest>,
    keep: usize,
    total: usize,
}

impl Requests {
    fn new(keep: usize) -> Mutex<Self> {
        Mutex::new(Self {
            kept: VecDeque::new(),
            keep,
            total: 0,
        })
    }

    fn record(&mut self, request: ChatRequest) {
        self.total += 1;
        if self.keep == 0 {
            return;
        }
        if self.kept.len() == self.keep {
            self.kept.pop_front();
        }
        self.kept.push_back(request);
    }
}

impl ScriptedModel {
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        Self {
            replies: Mutex::new(replies.into_iter().collect()),
            cycle: None,
            requests: Requests::new(KEPT_REQUESTS),
        }
    }

    /// Plays the replies in order, then starts over, forever.
    pub fn repeating(replies: Vec<Reply>) -> Self {
        Self {
            replies: Mutex::new(replies.iter().cloned().collect()),
            cycle: Some(replies),
            requests: Requests::new(KEPT_REQUESTS),
        }
    }

    /// Keep the latest `n` requests instead of [`KEPT_REQUESTS`] (0: keep none, count only).
    pub fn keeping(self, n: usize) -> Self {
        *self.requests.lock().unwrap() = Requests {
            kept: VecDeque::new(),
            keep: n,
            total: 0,
        };
        self
    }

    /// The latest requests received (all of them while fewer than the kept number have come), in
    /// order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().kept.iter().cloned().collect()
    }

    /// How many requests have been received in all, including those no longer kept.
    pub fn request_count(&self) -> usize {
        self.requests.lock().unwrap().total
    }

    /// How many scripted replies have not been played yet.
    pub fn remaining(&self) -> usize {
        self.replies.lock().unwrap().len()
    }

    /// Append more replies to the script.
    pub fn push(&self, reply: Reply) {
        self.replies.lock().unwrap().push_back(reply);
    }

    /// Drop the replies not played yet (those one attempt was given for calls it might make).
    pub fn clear(&self) {
        self.replies.lock().unwrap().clear();
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, BackendError> {
        let max_tokens = request.settings.max_tokens;
        self.requests.lock().unwrap().record(request);
        let next = {
            let mut replies = self.replies.lock().unwrap();
            if replies.is_empty()
                && let Some(all) = &self.cycle
            {
                replies.extend(all.iter().cloned());
            }
            replies.pop_front()
        };
        let reply = next.ok_or_else(|| BackendError::InvalidRequest {
            message: "the scripted model has no reply left".into(),
        })?;
        if let Some(err) = reply.open_error {
            return Err(err);
        }
        let mut usage = reply.usage.unwrap_or(Usage {
            input_tokens: 10,
            output_tokens: reply.output_tokens,
            ..Usage::default()
        });
        if reply.spends_max_tokens {
            usage.output_tokens = u64::from(max_tokens);
        }
        Ok(play(reply.steps, usage))
    }
}

/// Turn steps into a stream, honouring delays, failures and stalls; `done` reports `usage`.
pub fn play(steps: Vec<Step>, usage: Usage) -> EventStream {
    let steps: VecDeque<Step> = steps.into();
    futures::stream::unfold(Some(steps), move |state| async move {
        let mut steps = state?;
        loop {
            match steps.pop_front()? {
                Step::Event(ev) => return Some((Ok(ev), Some(steps))),
                Step::Done(stop_reason) => {
                    let done = ModelEvent::Done { stop_reason, usage };
                    return Some((Ok(done), Some(steps)));
                }
                Step::Fail(err) => return Some((Err(err), None)),
                Step::Stall => futures::future::pending::<()>().await,
                Step::Delay(d) => tokio::time::sleep(d).await,
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;

    fn request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system: "s".into(),
            messages: vec![],
            tools: Default::default(),
            settings: Default::default(),
        }
    }

    #[tokio::test]
    async fn plays_replies_in_order_and_records_requests() {
        let model = ScriptedModel::new([Reply::text("hello there"), Reply::text("bye")]);
        let first: Vec<_> = model
            .stream(request())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(
            first,
            vec![
                ModelEvent::text("hello "),
                ModelEvent::text("there"),
                ModelEvent::Done {
                    stop_reason: StopReason::EndTurn,
                    usage: Usage {
                        input_tokens: 10,
                        output_tokens: 2,
                        ..Usage::default()
                    }
                },
            ]
        );
        assert_eq!(model.remaining(), 1);
        let _second = model.stream(request()).await.unwrap();
        assert_eq!(model.requests().len(), 2);
        let err = model.stream(request()).await.err().unwrap();
        assert!(matches!(err, BackendError::InvalidRequest { .. }));
    }

    #[tokio::test]
    async fn a_reply_spending_max_tokens_reports_the_requests_allowance_as_output() {
        let model = ScriptedModel::new([Reply::text("hi").spending_max_tokens()]);
        let mut req = request();
        req.settings.max_tokens = 1_234;
        let events: Vec<_> = model
            .stream(req)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let Some(ModelEvent::Done { usage, .. }) = events.last() else {
            panic!("no done event: {events:?}");
        };
        assert_eq!(usage.output_tokens, 1_234);
        assert_eq!(usage.input_tokens, 10);
    }

    #[tokio::test]
    async fn fails_after_some_tokens() {
        let model = ScriptedModel::new([Reply::new().say("partial answer").then_fail(
            BackendError::Throttled {
                retry_after: Some(Duration::from_secs(2)),
            },
        )]);
        let items: Vec<_> = model.stream(request()).await.unwrap().collect().await;
        assert_eq!(items.len(), 3);
        assert!(matches!(
            items[2],
            Err(BackendError::Throttled { retry_after: Some(d) }) if d == Duration::from_secs(2)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stall_never_yields() {
        let model = ScriptedModel::new([Reply::new().say("hi").then_stall()]);
        let mut s = model.stream(request()).await.unwrap();
        assert!(s.next().await.unwrap().is_ok());
        let next = tokio::time::timeout(Duration::from_secs(3600), s.next()).await;
        assert!(next.is_err(), "a stalled stream must not yield");
    }

    #[tokio::test]
    async fn only_the_latest_requests_are_kept_and_all_are_counted() {
        let model = ScriptedModel::repeating(vec![Reply::text("ok")]).keeping(3);
        for n in 0..10u32 {
            let mut req = request();
            req.settings.max_tokens = n;
            let _ = model.stream(req).await.unwrap();
        }
        let kept: Vec<u32> = model
            .requests()
            .iter()
            .map(|r| r.settings.max_tokens)
            .collect();
        assert_eq!(kept, vec![7, 8, 9], "the latest three, oldest first");
        assert_eq!(model.request_count(), 10);
    }

    #[tokio::test]
    async fn the_default_keeps_a_bounded_number() {
        let model = ScriptedModel::repeating(vec![Reply::text("ok")]);
        for _ in 0..KEPT_REQUESTS + 5 {
            let _ = model.stream(request()).await.unwrap();
        }
        assert_eq!(model.requests().len(), KEPT_REQUESTS);
        assert_eq!(model.request_count(), KEPT_REQUESTS + 5);
    }

    #[tokio::test]
    async fn open_error_is_returned_before_any_stream() {
        let model = ScriptedModel::new([Reply::error(BackendError::Overloaded)]);
        assert!(matches!(
            model.stream(request()).await.err().unwrap(),
            BackendError::Overloaded
        ));
        assert_eq!(model.requests().len(), 1);
    }
}
