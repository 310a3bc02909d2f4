//! The runner turns every outcome into a result the model can read.

use serde_json::{Value, json};
use std::time::Duration;
use tools::*;
use transcript::Part;

fn ctx() -> Ctx {
    Ctx {
        user_id: "u1".into(),
        actor: Actor::Agent,
        action_id: ActionId("act-42".into()),
        conversation_id: "c1".into(),
        call_key: None,
        grant: Grant::default(),
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1},
            "seats": {"type": "integer", "minimum": 1}
        },
        "required": ["title"],
        "additionalProperties": false
    })
}

fn registry() -> Registry {
    let mut r = Registry::new(RunnerOptions {
        result_cap_chars: 200,
        timeout: Duration::from_secs(5),
    });
    r.register(
        ToolDef::new("create_event", "Create an event.", schema()).purposes(&["planner"]),
        handler_fn(|ctx: Ctx, args: Value| async move {
            Ok(json!({"id": "e1", "title": args["title"], "owner": ctx.user_id.0, "_effects": ["events"]}))
        }),
    )
    .unwrap();
    r.register(
        ToolDef::new("list_events", "List events.", json!({"type": "object"}))
            .purposes(&["planner", "support"])
            .read_only(),
        handler_fn(|_, _| async { Ok(json!([{"id": "e1"}, {"id": "e2"}])) }),
    )
    .unwrap();
    r.register(
        ToolDef::new("explode", "Panics.", json!({"type": "object"})).purposes(&["planner"]),
        handler_fn(|_, _| async { panic!("db pool poisoned: secret=hunter2") }),
    )
    .unwrap();
    r.register(
        ToolDef::new("cancel_event", "Cancel.", json!({"type": "object"})).purposes(&["planner"]),
        handler_fn(|_, _| async {
            Err(ToolError::domain(
                "already_cancelled",
                "That event is already cancelled.",
            ))
        }),
    )
    .unwrap();
    r.register(
        ToolDef::new("broken", "Fails.", json!({"type": "object"})).purposes(&["planner"]),
        handler_fn(|_, _| async {
            Err(ToolError::internal(
                "connection refused: postgres://admin:pw@db",
            ))
        }),
    )
    .unwrap();
    r.register(
        ToolDef::new("dump", "Big.", json!({"type": "object"})).purposes(&["planner"]),
        handler_fn(|_, _| async { Ok(json!({"blob": "x".repeat(5000)})) }),
    )
    .unwrap();
    r.register(
        ToolDef::new("quote_back", "Refuses, quoting.", json!({"type": "object"}))
            .purposes(&["planner"]),
        handler_fn(|_, args: Value| async move {
            Err(ToolError::domain(
                "not_found",
                format!("There is no event called {}.", args["say"]),
            ))
        }),
    )
    .unwrap();
    r.register(
        ToolDef::new("slow", "Hangs.", json!({"type": "object"})).purposes(&["planner"]),
        handler_fn(|_, _| async {
            futures::future::pending::<()>().await;
            Ok(json!({}))
        }),
    )
    .unwrap();
    r
}

async fn run(name: &str, input: Value) -> ToolOutcome {
    let call = ToolCall {
        id: "t1".into(),
        name: name.into(),
        input,
    };
    registry().run(&ctx(), "planner", &call).await
}

fn content(o: &ToolOutcome) -> &Value {
    match &o.part {
        Part::ToolResult {
            content,
            tool_use_id,
            ..
        } => {
            assert_eq!(tool_use_id, "t1");
            content
        }
        other => panic!("not a tool result: {other:?}"),
    }
}

#[tokio::test]
async fn valid_call_runs_with_ctx_and_strips_effects() {
    let o = run("create_event", json!({"title": "Spring Open"})).await;
    assert!(!o.is_error);
    assert_eq!(
        content(&o),
        &json!({"id": "e1", "title": "Spring Open", "owner": "u1"})
    );
    assert_eq!(o.effects, Some(json!(["events"])));
}

#[tokio::test]
async fn invalid_arguments_say_what_was_wrong() {
    let o = run("create_event", json!({"seats": 0, "owner": "someone-else"})).await;
    assert!(o.is_error);
    let msg = content(&o)["error"].as_str().unwrap();
    assert!(
        msg.starts_with("Invalid arguments for create_event"),
        "{msg}"
    );
    assert!(msg.contains("\"title\" is a required property"), "{msg}");
    assert!(msg.contains("at /seats"), "{msg}");
    assert!(msg.contains("owner"), "{msg}");
    assert!(msg.contains("call the tool again"), "{msg}");
}

#[tokio::test]
async fn a_huge_argument_is_named_by_its_place_not_quoted_back() {
    let huge = "x".repeat(1_000_000);
    let o = run("create_event", json!({"title": 7, "seats": huge})).await;
    let msg = content(&o)["error"].as_str().unwrap();
    assert!(msg.len() < 500, "{} bytes", msg.len());
    assert!(msg.contains("at /seats: the value is not of type"), "{msg}");
    assert!(
        msg.contains("at /title: 7 is not of type"),
        "short values are quoted: {msg}"
    );
    let o = run(
        "create_event",
        json!({"title": "Spring", &"k".repeat(1_000_000): 1}),
    )
    .await;
    let msg = content(&o)["error"].as_str().unwrap();
    assert!(msg.len() < 500, "an unexpected key: {} bytes", msg.len());
    assert!(
        msg.contains("Additional properties are not allowed"),
        "{msg}"
    );
    let o = run(&"y".repeat(1_000_000), json!({})).await;
    let msg = content(&o)["error"].as_str().unwrap();
    assert!(msg.len() < 500, "{} bytes", msg.len());
    assert!(msg.starts_with("Unknown tool \"yyy"), "{msg}");
}

#[tokio::test]
async fn a_long_domain_error_is_cut_to_the_result_cap() {
    let o = run("quote_back", json!({"say": "z".repeat(5_000)})).await;
    let msg = content(&o)["error"].as_str().unwrap();
    assert!(msg.chars().count() <= 200 + " [cut short]".len(), "{msg}");
    assert!(msg.ends_with("[cut short]"), "{msg}");
}

#[tokio::test]
async fn unknown_tool_lists_the_available_ones() {
    let o = run("delete_everything", json!({})).await;
    assert!(o.is_error);
    let msg = content(&o)["error"].as_str().unwrap();
    assert!(msg.contains("Unknown tool \"delete_everything\""), "{msg}");
    assert!(
        msg.contains("create_event, dump, explode, list_events"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_tool_of_another_purpose_is_unknown() {
    let call = ToolCall {
        id: "t1".into(),
        name: "create_event".into(),
        input: json!({"title": "x"}),
    };
    let o = registry().run(&ctx(), "support", &call).await;
    assert!(o.is_error);
    assert!(
        content(&o)["error"]
            .as_str()
            .unwrap()
            .contains("Available tools: list_events.")
    );
}

#[tokio::test]
async fn domain_failure_is_readable() {
    let o = run("cancel_event", json!({})).await;
    assert!(o.is_error);
    assert_eq!(
        content(&o),
        &json!({"error": "That event is already cancelled."})
    );
}

#[tokio::test]
async fn panic_becomes_a_generic_error() {
    let o = run("explode", json!({})).await;
    assert!(o.is_error);
    let shown = content(&o).to_string();
    assert!(shown.contains("Internal error in explode"), "{shown}");
    assert!(
        !shown.contains("hunter2"),
        "raw panic text must not reach the model"
    );
}

#[tokio::test]
async fn internal_error_is_generic_for_the_model() {
    let o = run("broken", json!({})).await;
    let shown = content(&o).to_string();
    assert!(shown.contains("Internal error in broken"));
    assert!(!shown.contains("postgres://"));
}

#[tokio::test]
async fn list_results_are_wrapped() {
    let o = run("list_events", json!({})).await;
    assert_eq!(content(&o), &json!({"items": [{"id": "e1"}, {"id": "e2"}]}));
}

#[tokio::test]
async fn oversized_results_are_capped_with_a_marker() {
    let o = run("dump", json!({})).await;
    assert!(!o.is_error);
    let shown = content(&o).as_str().unwrap();
    assert!(shown.starts_with("{\"blob\":\"xxx"));
    assert!(shown.contains("[truncated: showing 200 of 5011 characters; 4811 more not shown"));
    assert!(shown.chars().count() < 200 + 150);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_tool_times_out_readably() {
    let o = run("slow", json!({})).await;
    assert!(o.is_error);
    assert!(
        content(&o)["error"]
            .as_str()
            .unwrap()
            .contains("did not finish in time")
    );
}

#[test]
fn catalog_is_sorted_filtered_and_byte_stable() {
    let a = registry();
    let names: Vec<_> = a
        .catalog_for("planner")
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "broken",
            "cancel_event",
            "create_event",
            "dump",
            "explode",
            "list_events",
            "quote_back",
            "slow"
        ]
    );
    assert_eq!(a.catalog_for("support").len(), 1);
    // Registering in another order yields the same bytes.
    let mut b = Registry::default();
    for d in a.catalog_for("planner").into_iter().rev() {
        b.register(d.clone(), handler_fn(|_, _| async { Ok(json!({})) }))
            .unwrap();
    }
    let bytes = |r: &Registry| serde_json::to_vec(&r.catalog_for("planner")).unwrap();
    assert_eq!(bytes(&a), bytes(&b));
}

#[test]
fn bad_definitions_are_rejected_at_registration() {
    let mut r = registry();
    let noop = || handler_fn(|_, _| async { Ok(json!({})) });
    let dup = r.register(
        ToolDef::new("dump", "again", json!({"type": "object"})),
        noop(),
    );
    assert!(matches!(dup, Err(RegistryError::Duplicate(_))));
    let bad = r.register(
        ToolDef::new(
            "weird",
            "x",
            json!({"type": "object", "properties": {"a": {"type": 12}}}),
        ),
        noop(),
    );
    match &bad {
        Err(RegistryError::BadSchema { name, reason }) => {
            assert_eq!(name, "weird");
            assert!(
                reason.contains("12"),
                "the reason names the bad value: {reason}"
            );
        }
        other => panic!("a schema with `type: 12` is refused: {other:?}"),
    }
    let not_object = r.register(ToolDef::new("arr", "x", json!({"type": "array"})), noop());
    assert!(matches!(not_object, Err(RegistryError::BadSchema { .. })));
    let name = r.register(
        ToolDef::new("has space", "x", json!({"type": "object"})),
        noop(),
    );
    assert!(matches!(name, Err(RegistryError::BadName(_))));
}

/// A call answered from its receipt (the handler's output, recorded with its effect) is shaped
/// exactly as the handler's return value was: effects stripped and given back, lists wrapped,
/// long output capped — the same bytes for the model either way.
#[tokio::test]
async fn an_answer_from_a_recorded_output_is_shaped_as_the_run_was() {
    let r = registry();
    for (name, output) in [
        (
            "create_event",
            json!({"id": "e1", "title": "Spring Open", "owner": "u1", "_effects": ["events"]}),
        ),
        ("list_events", json!([{"id": "e1"}, {"id": "e2"}])),
        ("dump", json!({"blob": "x".repeat(5000)})),
    ] {
        let call = ToolCall {
            id: "t1".into(),
            name: name.into(),
            input: if name == "create_event" {
                json!({"title": "Spring Open"})
            } else {
                json!({})
            },
        };
        let ran = r.run(&ctx(), "planner", &call).await;
        assert_eq!(r.answer(&call, output), ran, "{name}");
    }
}
