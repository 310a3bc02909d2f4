//! N parallel turns of one user against a tight budget, through the real engine: on SQLite and
//! on DynamoDB (moto). Whatever the interleaving, the settled total never passes the cap by
//! more than one reservation, and every refused turn made no model call.

mod support;

use backend::{Reply, ScriptedModel};
use budget::config::Cap;
use budget::{
    Bucket, BudgetConfig, Guards, InMemoryAccounts, PriceTable, Source, StandardGuards,
    estimate_input_tokens, lines,
};
use engine::{Engine, EngineOptions, NullSink, TurnEnd, TurnInput};
use std::sync::Arc;
use store::Store;
use store_sqlite::SqliteStore;
use tests::{Calls, sample_tools};
use tools::ActionId;
use transcript::{Conversation, Usage};

const NOW: i64 = 1_800_000_030_000;
const TURNS: usize = 16;
const ALLOWANCE: u64 = 100;

fn config(minute_cap: u64) -> BudgetConfig {
    BudgetConfig {
        prices: PriceTable::with_file(
            "test-prices.json",
            r#"{"models": {"test-model": {"input": 1, "output": 10, "cache_read": 0.1, "cache_write": 2}}}"#,
        )
        .unwrap(),
        output_allowance: ALLOWANCE,
        user_tokens_per_minute: Cap {
            limit: Some(minute_cap),
            source: Source::Default,
        },
        ..BudgetConfig::default()
    }
}

fn engine(store: Arc<dyn Store>, model: Arc<ScriptedModel>, config: BudgetConfig) -> Engine {
    let guards = Guards::standard(StandardGuards {
        ledger: store.clone(),
        config: Arc::new(config),
        accounts: Arc::new(InMemoryAccounts::default()),
        clock: Arc::new(|| NOW),
        no_model: None,
    });
    Engine::new(
        model,
        Arc::new(sample_tools(Calls::default())),
        store,
        EngineOptions {
            model_id: "test-model".into(),
            ..EngineOptions::default()
        },
    )
    .with_guard(Arc::new(guards))
}

async fn conversations(store: &dyn Store) {
    for i in 0..TURNS {
        let conv = Conversation::new(format!("c{i:02}"), "ana", "web", "planner");
        store.create_conversation(&conv).await.unwrap();
    }
}

fn turn_input(i: usize) -> TurnInput {
    TurnInput {
        conversation_id: format!("c{i:02}").into(),
        text: "plan my week".into(),
        action_id: ActionId(format!("a{i:02}")),
        attachments: Vec::new(),
        attachment_notes: Vec::new(),
        button_id: None,
    }
}

/// The tokens one call of these turns reserves, measured on a throwaway engine.
async fn reservation() -> u64 {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    conversations(store.as_ref()).await;
    let model = Arc::new(ScriptedModel::new([Reply::text("ok")]));
    let probe = engine(store, model.clone(), config(u64::MAX / 4));
    probe.run_turn(turn_input(0), &NullSink).await.unwrap();
    estimate_input_tokens(&model.requests()[0]) + ALLOWANCE
}

async fn check_parallel_turns(store: Arc<dyn Store>) {
    let reserve = reservation().await;
    // Room for five and a half reservations: five fit, a sixth never does.
    let cap = reserve * 11 / 2;
    // Each answered call really uses a fifth more than it reserved (settled after the call): the
    // overshoot the reservation cannot see.
    let overrun = reserve / 5;
    conversations(store.as_ref()).await;
    let real = Usage {
        input_tokens: reserve - ALLOWANCE,
        output_tokens: ALLOWANCE + overrun,
        ..Usage::default()
    };
    let model = Arc::new(ScriptedModel::repeating(vec![
        Reply::text("Here is your week.").usage(real),
    ]));
    let engine = Arc::new(engine(store.clone(), model.clone(), config(cap)));
    let tasks: Vec<_> = (0..TURNS)
        .map(|i| {
            let engine = engine.clone();
            tokio::spawn(async move { engine.run_turn(turn_input(i), &NullSink).await })
        })
        .collect();
    let mut answered = 0;
    for task in tasks {
        let outcome = task.await.unwrap().unwrap();
        match outcome.end {
            TurnEnd::Answered => answered += 1,
            TurnEnd::Denied => {
                assert_eq!(outcome.reply, lines::USER_TOKENS_MINUTE);
                assert_eq!(
                    outcome.model_calls, 0,
                    "the refused call is not made, so not counted"
                );
                assert_eq!(outcome.usage, Usage::default());
            }
            other => panic!("unexpected end {other:?}"),
        }
    }
    // Five fit when every reservation lands before any settlement; four when settlements come
    // first (4 × 1.2 reservations + one more would pass 5.5). Either way, never a sixth.
    assert!((4..=5).contains(&answered), "{answered} turns answered");
    assert_eq!(
        model.requests().len(),
        answered,
        "refused turns never reached the model"
    );
    let used = store
        .bucket_usage(&[Bucket::UserTokensMinute.key(&"ana".into(), &"".into(), NOW)])
        .await
        .unwrap()[0];
    assert_eq!(
        used,
        answered as u64 * (reserve + overrun),
        "settled to the real usage"
    );
    assert!(
        used <= cap + reserve,
        "used {used} passes cap {cap} by more than one reservation ({reserve})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_turns_on_sqlite_stay_within_one_reservation_of_the_cap() {
    check_parallel_turns(Arc::new(SqliteStore::open_in_memory().unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_turns_on_dynamodb_stay_within_one_reservation_of_the_cap() {
    check_parallel_turns(Arc::new(
        support::moto_dynamo_store("bridle-parallel").await,
    ))
    .await;
}
