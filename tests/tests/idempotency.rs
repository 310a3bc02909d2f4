//! A tool that calls an outside system gets a key unique to the model's call and stable across a
//! resumed turn (`Ctx::call_key`): when a crash lands between the outside call and the record of
//! its result, the repeated call carries the same key, so the outside system can tell.

use backend::{Reply, ScriptedModel};
use channel_jobs::JobOutcome;
use engine::{Engine, EngineOptions};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::ConversationStore;
use store_sqlite::SqliteStore;
use tests::{FlakyStore, web_job, web_jobs};
use tools::{Ctx, Registry, ToolDef, handler_fn};
use transcript::Conversation;

#[tokio::test]
async fn a_repeated_outside_call_carries_the_same_idempotency_key() {
    let keys: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let mut registry = Registry::default();
    let seen = keys.clone();
    registry
        .register(
            ToolDef::new(
                "charge_card",
                "Charge the user's card (an outside payment API).",
                json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"], "additionalProperties": false}),
            )
            .purposes(&["chat"]),
            handler_fn(move |ctx: Ctx, _: Value| {
                seen.lock().unwrap().push(ctx.call_key.clone());
                async { Ok(json!({"charged": true})) }
            }),
        )
        .unwrap();
    let store = Arc::new(FlakyStore::new(Arc::new(
        SqliteStore::open_in_memory().unwrap(),
    )));
    store
        .create_conversation(&Conversation::new("c1", "u1", "web", "chat"))
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new([
        Reply::tool_call("t1", "charge_card", json!({"cents": 500})),
        Reply::text("Charged."),
    ]));
    let engine = Arc::new(Engine::new(
        model,
        Arc::new(registry),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    ));
    let jobs = web_jobs(engine, store.clone(), Arc::default());
    let job = web_job("c1", "u1", "m-1", "pay the deposit");
    // The outside call happens; recording its result fails (the worker dies there).
    store.fail_results_after(0);
    let first = jobs.run(&job, Duration::from_secs(60)).await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    store.heal();
    assert_eq!(
        jobs.run(&job, Duration::from_secs(60)).await,
        JobOutcome::Done
    );
    let keys = keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 2, "the unrecorded call ran again");
    assert!(keys[0].is_some());
    assert_eq!(
        keys[0], keys[1],
        "with the same key: the payment API dedupes it"
    );
    assert!(keys[0].as_deref().unwrap().ends_with("#t1"), "{keys:?}");
}
