//! Every `tool_use` a turn shows is resolved: [`OpenTools`] sits between the turn and its sink,
//! remembers the calls shown without a `tool_result` yet, and answers them with `tool_not_run`
//! before the turn's `error` or `done` — and when the turn stops with an error of its own — so
//! a client never shows a tool as running after its turn is over.

use crate::{EventSink, TurnEvent};
use std::sync::Mutex;

/// Wraps a turn's sink; see the module docs.
pub(crate) struct OpenTools<'a> {
    sink: &'a dyn EventSink,
    /// `(id, name)` of the calls shown and not answered yet, in the order they were shown.
    open: Mutex<Vec<(String, String)>>,
}

impl<'a> OpenTools<'a> {
    pub(crate) fn new(sink: &'a dyn EventSink) -> Self {
        Self {
            sink,
            open: Mutex::default(),
        }
    }

    /// Answer every call still open with `tool_not_run`.
    pub(crate) fn resolve(&self) {
        let open = std::mem::take(&mut *self.open.lock().unwrap());
        for (id, name) in open {
            self.sink.emit(TurnEvent::ToolNotRun { id, name });
        }
    }
}

impl EventSink for OpenTools<'_> {
    fn emit(&self, event: TurnEvent) {
        match &event {
            TurnEvent::ToolUse { id, name, .. } => {
                self.open.lock().unwrap().push((id.clone(), name.clone()));
            }
            TurnEvent::ToolResult { id, .. } | TurnEvent::ToolNotRun { id, .. } => {
                self.open.lock().unwrap().retain(|(open, _)| open != id);
            }
            TurnEvent::Error { .. } | TurnEvent::Done { .. } => self.resolve(),
            _ => {}
        }
        self.sink.emit(event);
    }

    fn listening(&self) -> bool {
        self.sink.listening()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CollectSink, TurnEnd};
    use serde_json::json;

    fn tool_use(id: &str) -> TurnEvent {
        TurnEvent::ToolUse {
            id: id.into(),
            name: "add_note".into(),
            input: json!({}),
        }
    }

    fn not_run(id: &str) -> TurnEvent {
        TurnEvent::ToolNotRun {
            id: id.into(),
            name: "add_note".into(),
        }
    }

    #[test]
    fn calls_left_open_are_not_run_before_the_error_and_done() {
        let collected = CollectSink::default();
        let sink = OpenTools::new(&collected);
        sink.emit(tool_use("a"));
        sink.emit(tool_use("b"));
        sink.emit(TurnEvent::ToolResult {
            id: "a".into(),
            name: "add_note".into(),
            is_error: false,
        });
        sink.emit(TurnEvent::Error {
            message: "Sorry.".into(),
        });
        sink.emit(TurnEvent::Done {
            end: TurnEnd::BackendFailed,
        });
        let events = collected.events();
        assert_eq!(events[3], not_run("b"));
        assert!(matches!(events[4], TurnEvent::Error { .. }));
        assert!(matches!(events[5], TurnEvent::Done { .. }));
        assert_eq!(events.len(), 6, "{events:?}");
    }

    #[test]
    fn resolve_answers_what_is_open_once() {
        let collected = CollectSink::default();
        let sink = OpenTools::new(&collected);
        sink.emit(tool_use("a"));
        sink.resolve();
        sink.resolve();
        sink.emit(TurnEvent::Done {
            end: TurnEnd::Answered,
        });
        assert_eq!(collected.events()[1], not_run("a"));
        assert_eq!(collected.events().len(), 3);
    }
}
