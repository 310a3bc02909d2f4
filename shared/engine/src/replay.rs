//! Replaying a recorded turn for evaluation (`bridle eval`): the request this engine would send
//! at a point of a stored segment, and one model call with the engine's deadlines — nothing
//! stored, no guard, no tool run. The caller answers tool calls itself (from recorded results)
//! and adds them with [`Replay::push`], as the turn loop would have stored them.

use crate::call::{Limits, Shown, Streamed, stream_call};
use crate::history::History;
use crate::{Engine, NullSink};
use backend::{BackendError, ChatRequest, ToolSpec};
use std::sync::Arc;
use std::time::Instant;
use transcript::{Message, Part, StopReason, Usage};

/// A recorded turn being replayed: the stored segment up to the user's message, then whatever
/// the caller adds.
#[derive(Debug)]
pub struct Replay<'a> {
    engine: &'a Engine,
    history: History,
    tools: Arc<[ToolSpec]>,
}

/// What one replayed call answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayedCall {
    /// The assistant message's parts, as the turn would store them.
    pub parts: Vec<Part>,
    pub stop_reason: StopReason,
    pub usage: Usage,
    pub latency_ms: u64,
}

/// A replayed call that failed, with what it streamed first.
#[derive(Debug, Clone)]
pub struct FailedReplay {
    pub error: BackendError,
    pub parts: Vec<Part>,
}

impl Engine {
    /// Start replaying a turn of a conversation of `purpose` (its tool catalogue) from `rows`:
    /// the stored rows of its segment, up to and including the user's message (with its
    /// context block, as stored).
    pub fn replay(&self, purpose: &str, rows: Vec<Message>) -> Replay<'_> {
        let tools = self
            .tools
            .catalog_for(purpose)
            .into_iter()
            .map(|d| ToolSpec {
                name: d.name.clone(),
                description: d.description.clone(),
                input_schema: d.input_schema.clone(),
            })
            .collect();
        Replay {
            engine: self,
            history: History::new(rows),
            tools,
        }
    }

    /// The model calls of a turn at most (the cycle ceiling).
    pub fn max_cycles(&self) -> u32 {
        self.options.max_cycles
    }
}

impl Replay<'_> {
    /// The request the turn loop sends next (as `Turn::request`, reasoning kept).
    pub fn request(&self) -> ChatRequest {
        self.engine
            .request_for(self.history.chat(), self.tools.clone())
    }

    /// One call of the engine's model with the next request, under the engine's call deadline
    /// and idle timeout. Not retried: a replay reports what the model did.
    pub async fn call(&self) -> Result<ReplayedCall, FailedReplay> {
        let limits = Limits {
            call_timeout: self.engine.options.call_timeout,
            idle_timeout: self.engine.options.idle_timeout,
        };
        let started = Instant::now();
        let mut acc = Streamed::default();
        let result = stream_call(
            self.engine.model.as_ref(),
            self.request(),
            limits,
            &NullSink,
            &mut Shown::default(),
            &mut acc,
        )
        .await;
        match result {
            Ok((stop_reason, usage)) => Ok(ReplayedCall {
                parts: acc.parts,
                stop_reason,
                usage,
                latency_ms: started.elapsed().as_millis() as u64,
            }),
            Err(error) => Err(FailedReplay {
                error,
                parts: acc.parts,
            }),
        }
    }

    /// Add a row (the replayed answer, the tool results given to it) to the history.
    pub fn push(&mut self, row: Message) {
        self.history.push(row);
    }
}
