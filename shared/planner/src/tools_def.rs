//! The planner's tools: thin adapters that parse arguments, call one service and shape the
//! answer. Identity comes from `Ctx`; no schema has a field naming a user.

use crate::events::{EventChanges, NewEvent};
use crate::grid::with_refresh;
use crate::{Caller, Planner, PlannerError};
use serde_json::{Value, json};
use std::future::Future;
use std::sync::Arc;
use store::UndoScope;
use tools::{Ctx, Registry, RegistryError, ToolDef, ToolError, handler_fn};

/// The conversation purpose the planner tools are offered for.
pub const PURPOSE: &str = "planner";

const DATE_TIME: &str = "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}$";

/// Register every planner tool, offered for `purposes` (at least [`PURPOSE`] is usual).
pub fn register(
    registry: &mut Registry,
    planner: Arc<Planner>,
    purposes: &[&str],
) -> Result<(), RegistryError> {
    let id = |what: &str| json!({"type": "string", "minLength": 1, "maxLength": 200, "description": what});
    let object = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required, "additionalProperties": false});
    let defs = [
        (
            ToolDef::new(
                "create_event",
                "Create a draft event (it becomes the active event). Returns the event.",
                object(
                    json!({
                        "title": {"type": "string", "minLength": 1, "maxLength": 120},
                        "starts_at": {"type": "string", "pattern": DATE_TIME, "description": "Local date and time, YYYY-MM-DDTHH:MM"},
                        "venue": {"type": "string", "minLength": 1, "maxLength": 200},
                        "capacity": {"type": "integer", "minimum": 1, "maximum": 100000}
                    }),
                    &["title", "starts_at", "venue", "capacity"],
                ),
            ),
            Op::Create,
        ),
        (
            ToolDef::new(
                "update_event",
                "Change an event's title, start, venue or capacity. Give only what changes.",
                object(
                    json!({
                        "event_id": id("The event's id"),
                        "title": {"type": "string", "minLength": 1, "maxLength": 120},
                        "starts_at": {"type": "string", "pattern": DATE_TIME},
                        "venue": {"type": "string", "minLength": 1, "maxLength": 200},
                        "capacity": {"type": "integer", "minimum": 1, "maximum": 100000}
                    }),
                    &["event_id"],
                ),
            ),
            Op::Update,
        ),
        (
            ToolDef::new(
                "publish_event",
                "Publish a draft event: registration opens.",
                object(json!({"event_id": id("The event's id")}), &["event_id"]),
            ),
            Op::Publish,
        ),
        (
            ToolDef::new(
                "cancel_event",
                "Cancel an event.",
                object(json!({"event_id": id("The event's id")}), &["event_id"]),
            ),
            Op::Cancel,
        ),
        (
            ToolDef::new(
                "list_events",
                "List the user's events, soonest first; with `from`, only those on or after that \
                 date (the context block shows the next few; a long list is cut, so ask from a \
                 date to see further).",
                object(
                    json!({
                        "from": {
                            "type": "string",
                            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
                            "description": "A date, YYYY-MM-DD: list only events on or after it"
                        }
                    }),
                    &[],
                ),
            )
            .read_only(),
            Op::ListEvents,
        ),
        (
            ToolDef::new(
                "register_attendee",
                "Register a person for an event.",
                object(
                    json!({
                        "event_id": id("The event's id"),
                        "name": {"type": "string", "minLength": 1, "maxLength": 120},
                        "email": {"type": "string", "minLength": 3, "maxLength": 254}
                    }),
                    &["event_id", "name", "email"],
                ),
            ),
            Op::Register,
        ),
        (
            ToolDef::new(
                "withdraw_attendee",
                "Withdraw a registered person from their event.",
                object(
                    json!({"attendee_id": id("The attendee's id")}),
                    &["attendee_id"],
                ),
            ),
            Op::Withdraw,
        ),
        (
            ToolDef::new(
                "list_attendees",
                "List the people registered for an event.",
                object(json!({"event_id": id("The event's id")}), &["event_id"]),
            )
            .read_only(),
            Op::ListAttendees,
        ),
        (
            ToolDef::new(
                "focus_event",
                "Make an event the one this conversation is about.",
                object(json!({"event_id": id("The event's id")}), &["event_id"]),
            ),
            Op::Focus,
        ),
        (
            ToolDef::new(
                "undo",
                "Undo the most recent change made in this conversation (all of it). Call it again to go further back.",
                object(json!({}), &[]),
            ),
            Op::Undo,
        ),
    ];
    for (def, op) in defs {
        let planner = planner.clone();
        // Focus is about a conversation; an MCP client has none.
        let offered: Vec<&str> = purposes
            .iter()
            .copied()
            .filter(|p| !matches!(op, Op::Focus) || *p != tools::MCP_PURPOSE)
            .collect();
        let changes = !def.read_only;
        registry.register(
            def.purposes(&offered),
            handler_fn(move |ctx: Ctx, args: Value| {
                let planner = planner.clone();
                async move {
                    crate::direction::refused(&args)?;
                    let output = op.run(&planner, &ctx, &args).await?;
                    if !changes {
                        return Ok(output);
                    }
                    // The event the call changed: named in its arguments, or just created.
                    let event = match op {
                        Op::Create => output.get("id"),
                        _ => args.get("event_id"),
                    }
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                    Ok(with_refresh(output, event.as_deref()))
                }
            }),
        )?;
    }
    crate::program_tools::register(registry, planner, purposes)
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Create,
    Update,
    Publish,
    Cancel,
    ListEvents,
    Register,
    Withdraw,
    ListAttendees,
    Focus,
    Undo,
}

impl Op {
    async fn run(self, planner: &Planner, ctx: &Ctx, args: &Value) -> Result<Value, ToolError> {
        let caller = Caller::from_ctx(ctx);
        let text = |name: &str| args.get(name).and_then(Value::as_str).map(str::to_owned);
        let number = |name: &str| {
            args.get(name)
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
        };
        let required = |name: &str| text(name).unwrap_or_default();
        match self {
            Op::Create => {
                json_of(planner.create_event(
                    &caller,
                    NewEvent {
                        title: required("title"),
                        starts_at: required("starts_at"),
                        venue: required("venue"),
                        capacity: number("capacity").unwrap_or(1),
                    },
                ))
                .await
            }
            Op::Update => {
                let changes = EventChanges {
                    title: text("title"),
                    starts_at: text("starts_at"),
                    venue: text("venue"),
                    capacity: number("capacity"),
                };
                json_of(planner.update_event(&caller, &required("event_id"), changes)).await
            }
            Op::Publish => json_of(planner.publish_event(&caller, &required("event_id"))).await,
            Op::Cancel => json_of(planner.cancel_event(&caller, &required("event_id"))).await,
            Op::ListEvents => {
                json_of(planner.list_events_from(&caller, text("from").as_deref())).await
            }
            Op::Register => {
                json_of(planner.register_attendee(
                    &caller,
                    &required("event_id"),
                    &required("name"),
                    &required("email"),
                ))
                .await
            }
            Op::Withdraw => {
                json_of(planner.withdraw_attendee(&caller, &required("attendee_id"))).await
            }
            Op::ListAttendees => {
                json_of(planner.list_attendees(&caller, &required("event_id"))).await
            }
            Op::Focus => json_of(planner.focus_event(&caller, &required("event_id"))).await,
            // The assistant undoes only what was done in its own conversation.
            Op::Undo => {
                let here = UndoScope::Conversation(ctx.conversation_id.clone());
                json_of(planner.undo(&caller, here)).await
            }
        }
    }
}

async fn json_of<T: serde::Serialize>(
    result: impl Future<Output = Result<T, PlannerError>>,
) -> Result<Value, ToolError> {
    let value = result.await?;
    serde_json::to_value(value).map_err(ToolError::internal)
}
