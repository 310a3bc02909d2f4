use crate::TurnEnd;
use serde::Serialize;
use serde_json::Value;
use std::sync::Mutex;

/// What a turn tells the outside world as it happens (the web chat streams these as SSE).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnEvent {
    /// Reply text, as it streams.
    Token { text: String },
    /// The model began reasoning (once a model call). What it thinks is not sent: the visible
    /// transcript leaves reasoning out, and the stream does too (it may quote the harness's
    /// notes, and would double the bytes sent for a "Thinking…").
    Reasoning,
    /// The model asked for a tool.
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// A tool finished.
    ToolResult {
        id: String,
        name: String,
        is_error: bool,
    },
    /// A tool the model asked for (a `tool_use` already shown) will not run in this turn: the
    /// call failed mid-stream, the answer stopped for another reason, or the turn ended early.
    /// Every `tool_use` is followed by a `tool_result` or this before `error` / `done`.
    ToolNotRun { id: String, name: String },
    /// A tool changed something the UI shows (`_effects`).
    Effects { tool: String, effects: Value },
    /// Something failed; `message` is the calm sentence the user sees.
    Error { message: String },
    /// The reply carried markers: this is the text to show instead of what streamed, with its
    /// buttons (the web chat replaces the streamed bubble with it).
    Shaped {
        text: String,
        buttons: Vec<crate::ShapedButton>,
    },
    /// The turn is over.
    Done { end: TurnEnd },
}

/// Where a turn's events go. Emitting never blocks and never fails the turn.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: TurnEvent);

    /// Whether anyone reads the events as they stream: `false` lets the turn skip building the
    /// ones nobody reads (each token's, each tool call's copy of its input). `error` and
    /// `done` are emitted all the same.
    fn listening(&self) -> bool {
        true
    }
}

impl EventSink for tokio::sync::mpsc::UnboundedSender<TurnEvent> {
    fn emit(&self, event: TurnEvent) {
        // A closed receiver (the browser went away) must not stop the turn.
        let _ = self.send(event);
    }
}

/// Discards events (queue workers that reply once at the end).
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, _: TurnEvent) {}

    fn listening(&self) -> bool {
        false
    }
}

/// Keeps events in memory (tests, tools that need the list afterwards).
#[derive(Debug, Default)]
pub struct CollectSink(Mutex<Vec<TurnEvent>>);

impl CollectSink {
    pub fn events(&self) -> Vec<TurnEvent> {
        self.0.lock().unwrap().clone()
    }

    /// The concatenated `token` texts.
    pub fn text(&self) -> String {
        self.events()
            .iter()
            .filter_map(|e| match e {
                TurnEvent::Token { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

impl EventSink for CollectSink {
    fn emit(&self, event: TurnEvent) {
        self.0.lock().unwrap().push(event);
    }
}
