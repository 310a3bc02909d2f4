//! One model call: open the stream with a deadline, read it with an idle timeout, forward events,
//! and assemble the assistant message's parts.

use crate::{EventSink, TurnEvent};
use backend::{BackendError, ChatModel, ChatRequest, ModelEvent, ReasoningDelta};
use futures::{FutureExt, StreamExt};
use std::time::Duration;
use tokio::time::{Instant, timeout_at};
use transcript::{Part, Reasoning, StopReason, Usage};

/// The longest tool call id kept as the model gave it.
const MAX_CALL_ID_CHARS: usize = 64;

/// What a call streamed so far, in arrival order.
#[derive(Debug, Default)]
pub(crate) struct Streamed {
    pub parts: Vec<Part>,
    /// Whether any event reached the sink (then a retry would repeat what the user saw).
    pub emitted: bool,
    /// Whether the server sent keep-alives: it had the request and was working on it.
    pub kept_alive: bool,
    /// When the first text, reasoning or tool call arrived (time to first token).
    pub first_event_at: Option<Instant>,
    /// The ids of the calls this turn's earlier answers asked for: none is given again.
    pub earlier_call_ids: Vec<String>,
}

impl Streamed {
    fn push_text(&mut self, text: &str) {
        match self.parts.last_mut() {
            Some(Part::Text { text: t }) => t.push_str(text),
            _ => self.parts.push(Part::text(text)),
        }
    }

    fn push_reasoning(&mut self, delta: ReasoningDelta) {
        match (delta, self.parts.last_mut()) {
            (
                ReasoningDelta::Text(more),
                Some(Part::Reasoning(Reasoning::Text {
                    text,
                    signature: None,
                })),
            ) => text.push_str(&more),
            (ReasoningDelta::Text(text), _) => self.parts.push(Part::Reasoning(Reasoning::Text {
                text,
                signature: None,
            })),
            (
                ReasoningDelta::Signature(sig),
                Some(Part::Reasoning(Reasoning::Text { signature, .. })),
            ) if signature.is_none() => *signature = Some(sig),
            (ReasoningDelta::Signature(sig), _) => {
                // A signature with no reasoning text before it: keep it, with empty text.
                self.parts.push(Part::Reasoning(Reasoning::Text {
                    text: String::new(),
                    signature: Some(sig),
                }))
            }
            (ReasoningDelta::Redacted(data), _) => self
                .parts
                .push(Part::Reasoning(Reasoning::Redacted { data })),
        }
    }

    /// The id a tool call is kept under: the model's own when it is 1 to 64 letters, digits,
    /// `_` or `-` (what Bedrock gives and takes) and no other call of this answer or of the
    /// turn's earlier answers has it, else `call_<n>` for the n-th call of the answer (the
    /// first such name no call has). The id is
    /// in store keys (a call's result, its receipt) and pairs each result with its call, so a
    /// model or server that sends none, a huge one or the same one twice must not decide them.
    /// The request built from the transcript carries the kept id both ways.
    fn call_id(&self, id: String) -> String {
        let taken = |id: &str| {
            self.earlier_call_ids.iter().any(|other| other == id)
                || self
                    .parts
                    .iter()
                    .any(|p| matches!(p, Part::ToolUse { id: other, .. } if other == id))
        };
        let fits = (1..=MAX_CALL_ID_CHARS).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if fits && !taken(&id) {
            return id;
        }
        let n = self
            .parts
            .iter()
            .filter(|p| matches!(p, Part::ToolUse { .. }))
            .count();
        (n..)
            .map(|n| format!("call_{n}"))
            .find(|id| !taken(id))
            .expect("some call_<n> is free")
    }

    /// The text parts only: what the user saw of a call that failed midway.
    pub fn visible_parts(&self) -> Vec<Part> {
        self.parts
            .iter()
            .filter(|p| matches!(p, Part::Text { .. }))
            .cloned()
            .collect()
    }
}

/// The reply text as the user sees it across the calls of a turn. Text from a later call starts
/// a new paragraph, and the separator is part of what is shown (and recorded as visible).
#[derive(Debug, Default)]
pub(crate) struct Shown {
    pub text: String,
    block_open: bool,
}

impl Shown {
    /// Returns `piece` as it should be shown, and records it.
    pub fn show(&mut self, piece: String) -> String {
        let out = match self.start_piece() {
            "" => piece,
            separator => format!("{separator}{piece}"),
        };
        self.text.push_str(&out);
        out
    }

    /// A piece of text is about to be shown: the separator it takes (`"\n\n"` for the first
    /// piece of a new paragraph after text that does not end a line, else `""`). The piece
    /// itself is recorded by the caller: [`Shown::show`] at once, a model call's pieces together
    /// with the rest of its text by [`Shown::record_call`] when the call ends (not copied one
    /// token at a time).
    fn start_piece(&mut self) -> &'static str {
        let separator = if !self.block_open && !self.text.is_empty() && !self.text.ends_with('\n') {
            "\n\n"
        } else {
            ""
        };
        self.block_open = true;
        separator
    }

    /// Record what a call showed: its separator, then its text parts in order.
    fn record_call(&mut self, separator: &str, parts: &[Part]) {
        self.text.push_str(separator);
        for part in parts {
            if let Part::Text { text } = part {
                self.text.push_str(text);
            }
        }
    }

    /// Start from text already shown by an earlier attempt of the same turn.
    pub fn restore(&mut self, text: String) {
        self.text = text;
        self.block_open = false;
    }

    /// A whole line from the harness, in its own paragraph.
    pub fn show_line(&mut self, line: &str) -> String {
        self.close_block();
        let out = self.show(line.to_owned());
        self.close_block();
        out
    }

    /// The next text starts a new paragraph.
    pub fn close_block(&mut self) {
        self.block_open = false;
    }
}

/// Deadlines for one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub call_timeout: Duration,
    pub idle_timeout: Duration,
}

/// Run one call to completion. On `Err`, `acc` holds what was streamed before the failure.
/// Any event, a keep-alive included, restarts the idle timer; the whole-call deadline holds.
/// Either way `shown` has the call's text when it returns.
pub(crate) async fn stream_call(
    model: &dyn ChatModel,
    request: ChatRequest,
    limits: Limits,
    sink: &dyn EventSink,
    shown: &mut Shown,
    acc: &mut Streamed,
) -> Result<(StopReason, Usage), BackendError> {
    let mut separator = "";
    let result = stream_events(model, request, limits, sink, shown, acc, &mut separator).await;
    shown.record_call(separator, &acc.parts);
    result
}

/// [`stream_call`]'s events, with the separator the call's text was shown after.
async fn stream_events(
    model: &dyn ChatModel,
    request: ChatRequest,
    limits: Limits,
    sink: &dyn EventSink,
    shown: &mut Shown,
    acc: &mut Streamed,
    separator: &mut &'static str,
) -> Result<(StopReason, Usage), BackendError> {
    let deadline = Instant::now() + limits.call_timeout;
    let whole = BackendError::Timeout {
        after: limits.call_timeout,
    };
    // A sink nobody reads (a channel's job, which replies once at the end) gets no events
    // built for it; what was shown is kept all the same.
    let listening = sink.listening();
    let mut stream = timeout_at(deadline, model.stream(request))
        .await
        .map_err(|_| whole.clone())??;
    loop {
        // An event that is already there needs no timer: the deadlines bound waiting, and a
        // stream that never waits ends on its own (the output-token limit).
        let next = match stream.next().now_or_never() {
            Some(next) => next,
            None => {
                let idle_at = (Instant::now() + limits.idle_timeout).min(deadline);
                match timeout_at(idle_at, stream.next()).await {
                    Ok(next) => next,
                    Err(_) if idle_at == deadline => return Err(whole),
                    Err(_) => {
                        return Err(BackendError::Timeout {
                            after: limits.idle_timeout,
                        });
                    }
                }
            }
        };
        if let Some(Ok(
            ModelEvent::Text { .. } | ModelEvent::Reasoning { .. } | ModelEvent::ToolUse { .. },
        )) = &next
        {
            acc.first_event_at.get_or_insert_with(Instant::now);
        }
        match next {
            None => {
                return Err(BackendError::transport(
                    "the stream ended without a stop reason",
                ));
            }
            Some(Err(e)) => return Err(e),
            Some(Ok(ModelEvent::Done { stop_reason, usage })) => return Ok((stop_reason, usage)),
            // Bytes on the wire: the idle timer starts again at the top of the loop.
            Some(Ok(ModelEvent::KeepAlive)) => acc.kept_alive = true,
            Some(Ok(ModelEvent::Text { text })) => {
                // The call's first piece decides whether its text starts a new paragraph.
                let before = match shown.block_open {
                    true => "",
                    false => {
                        *separator = shown.start_piece();
                        *separator
                    }
                };
                acc.push_text(&text);
                acc.emitted = true;
                if listening {
                    let text = match before {
                        "" => text,
                        before => format!("{before}{text}"),
                    };
                    sink.emit(TurnEvent::Token { text });
                }
            }
            Some(Ok(ModelEvent::Reasoning { delta })) => {
                if let ReasoningDelta::Text(_) = &delta {
                    // Said once a call; the text stays in the transcript.
                    let first = !acc.parts.iter().any(|p| matches!(p, Part::Reasoning(_)));
                    if listening && first {
                        sink.emit(TurnEvent::Reasoning);
                    }
                    acc.emitted = true;
                }
                acc.push_reasoning(delta);
            }
            Some(Ok(ModelEvent::ToolUse {
                id,
                name,
                mut input,
            })) => {
                let id = acc.call_id(id);
                // `250.0` for an integer is `250` to everything that reads the call.
                tools::whole_numbers(&mut input);
                if listening {
                    sink.emit(TurnEvent::ToolUse {
                        id: id.clone(),
                        name: name.clone(),
                        input: input.clone(),
                    });
                }
                acc.emitted = true;
                acc.parts.push(Part::ToolUse { id, name, input });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CollectSink;
    use backend::{Reply, ScriptedModel};
    use serde_json::json;

    fn request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            ..Default::default()
        }
    }

    const LIMITS: Limits = Limits {
        call_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
    };

    /// Two calls of a turn as the loop makes them: what the sink streamed, piece by piece, is
    /// what `Shown` recorded, the second call's text in a paragraph of its own (also when a tool
    /// call comes before its text), and a sink nobody reads changes nothing of it.
    #[tokio::test]
    async fn the_shown_text_is_what_streamed_with_a_paragraph_per_call() {
        for listening in [true, false] {
            let model = ScriptedModel::new([
                Reply::new()
                    .say("Let me look.")
                    .call("t1", "list_events", json!({}))
                    .stop(StopReason::ToolUse),
                Reply::new()
                    .call("t2", "list_events", json!({}))
                    .say("Two events.")
                    .say(" Both open.")
                    .stop(StopReason::EndTurn),
            ]);
            let collected = CollectSink::default();
            let deaf = crate::NullSink;
            let sink: &dyn EventSink = if listening { &collected } else { &deaf };
            let mut shown = Shown::default();
            for _ in 0..2 {
                shown.close_block();
                let mut acc = Streamed::default();
                stream_call(&model, request(), LIMITS, sink, &mut shown, &mut acc)
                    .await
                    .unwrap();
            }
            assert_eq!(shown.text, "Let me look.\n\nTwo events. Both open.");
            if listening {
                assert_eq!(collected.text(), shown.text);
            }
            // A harness line after them starts its own paragraph too.
            assert_eq!(shown.show_line("Sorry."), "\n\nSorry.");
        }
    }

    /// A call that fails midway leaves what it streamed in `Shown`, as the user saw it.
    #[tokio::test]
    async fn a_failed_call_leaves_what_it_showed() {
        let model = ScriptedModel::new([Reply::new()
            .say("Half an")
            .then_fail(BackendError::Overloaded)]);
        let mut shown = Shown::default();
        shown.restore("Earlier.".into());
        let mut acc = Streamed::default();
        let collected = CollectSink::default();
        let err = stream_call(&model, request(), LIMITS, &collected, &mut shown, &mut acc)
            .await
            .unwrap_err();
        assert!(matches!(err, BackendError::Overloaded), "{err:?}");
        assert_eq!(shown.text, "Earlier.\n\nHalf an");
        assert_eq!(collected.text(), "\n\nHalf an");
    }
}
