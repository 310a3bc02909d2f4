use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tools::{Ctx, Registry, RunnerOptions, ToolDef, ToolError, handler_fn};

/// The order in which tool handlers actually ran: `(tool name, input)`.
#[derive(Clone, Default, Debug)]
pub struct Calls(Arc<Mutex<Vec<(String, Value)>>>);

impl Calls {
    pub fn list(&self) -> Vec<(String, Value)> {
        self.0.lock().unwrap().clone()
    }
    /// Forget the calls recorded so far (a benchmark's setup, so the list does not grow with
    /// the iteration count).
    pub fn clear(&self) {
        self.0.lock().unwrap().clear();
    }

    /// Record a call as the tools do (a benchmark's floor makes the tool's own work with it).
    pub fn push(&self, name: &str, input: &Value) {
        self.0
            .lock()
            .unwrap()
            .push((name.to_owned(), input.clone()));
    }
}

/// A small planner-like catalogue with tools that misbehave on purpose.
pub fn sample_tools(calls: Calls) -> Registry {
    let mut r = Registry::new(RunnerOptions {
        result_cap_chars: 20_000,
        timeout: Duration::from_secs(30),
    });
    let c = calls.clone();
    r.register(
        ToolDef::new(
            "list_events",
            "List the user's events.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
        .purposes(&["planner", "chat"])
        .read_only(),
        handler_fn(move |_ctx: Ctx, input: Value| {
            c.push("list_events", &input);
            async { Ok(json!([{"id": "e1", "title": "Spring Open"}, {"id": "e2", "title": "Summer Cup"}])) }
        }),
    )
    .unwrap();
    let c = calls.clone();
    r.register(
        ToolDef::new(
            "create_event",
            "Create an event. Returns its id.",
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "minLength": 1},
                    "date": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}
                },
                "required": ["title", "date"],
                "additionalProperties": false
            }),
        )
        .purposes(&["planner", "chat"]),
        handler_fn(move |ctx: Ctx, input: Value| {
            c.push("create_event", &input);
            async move {
                Ok(json!({
                    "id": "e3",
                    "title": input["title"],
                    "owner": ctx.user_id.0,
                    "_effects": {"refresh": ["events"]}
                }))
            }
        }),
    )
    .unwrap();
    let c = calls.clone();
    r.register(
        ToolDef::new(
            "export_attendees",
            "Export every attendee.",
            json!({"type": "object"}),
        )
        .purposes(&["planner", "chat"])
        .read_only(),
        handler_fn(move |_, input: Value| {
            c.push("export_attendees", &input);
            async { Ok(json!({"csv": "name,email\n".repeat(4_000)})) }
        }),
    )
    .unwrap();
    let c = calls.clone();
    r.register(
        ToolDef::new(
            "sync_calendar",
            "Sync with the calendar.",
            json!({"type": "object"}),
        )
        .purposes(&["planner", "chat"]),
        handler_fn(move |_, input: Value| {
            c.push("sync_calendar", &input);
            async move {
                if input.is_object() {
                    panic!("calendar token expired: tok_live_SECRET");
                }
                Err(ToolError::internal("unreachable"))
            }
        }),
    )
    .unwrap();
    r
}
