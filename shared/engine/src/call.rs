//! One model call: open the stream with a deadline, read it with an idle timeout, forward events,
//! and assemble the assistant message's parts.

use crate::{EventSink, TurnEvent};
use backend::{BackendError, ChatModel, ChatRequest, ModelEvent, ReasoningDelta};
use futures::{FutureExt, StreamExt};
use std::time::Duration;
use tokio::time::{Instant, timeout_at};
use transcript::{Part, Reasoning, StopReason, Usage};

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
        let out = if !self.block_open && !self.text.is_empty() && !self.text.ends_with('\n') {
            format!("\n\n{piece}")
        } else {
            piece
        };
        self.block_open = true;
        self.text.push_str(&out);
        out
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
pub(crate) async fn stream_call(
    model: &dyn ChatModel,
    request: ChatRequest,
    limits: Limits,
    sink: &dyn EventSink,
    shown: &mut Shown,
    acc: &mut Streamed,
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
                acc.push_text(&text);
                acc.emitted = true;
                let text = shown.show(text);
                if listening {
                    sink.emit(TurnEvent::Token { text });
                }
            }
            Some(Ok(ModelEvent::Reasoning { delta })) => {
                if let ReasoningDelta::Text(t) = &delta {
                    if listening {
                        sink.emit(TurnEvent::Reasoning { text: t.clone() });
                    }
                    acc.emitted = true;
                }
                acc.push_reasoning(delta);
            }
            Some(Ok(ModelEvent::ToolUse { id, name, input })) => {
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
