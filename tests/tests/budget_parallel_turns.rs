//! N parallel turns of one user against a tight budget, through the real engine: on SQLite and
//! on DynamoDB (moto). Whatever the interleaving, the settled total never passes the cap by
//! more than one reservation, and every refused turn made no model call.

use backend::{Reply, ScriptedModel};
use budget::config::Cap;
use budget::{Bucket, BudgetConfig, PriceTable, Source, estimate_input_tokens, lines};
use engine::{NullSink, TurnEnd};
use std::sync::Arc;
use store::Store;
use store_sqlite::SqliteStore;
use tests::budget_turns::{NOW, conversations, engine, turn_input};
use transcript::Usage;

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

/// The tokens one call of these turns reserves, measured on a throwaway engine.
async fn reservation() -> u64 {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    conversations(store.as_ref(), TURNS).await;
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
    conversations(store.as_ref(), TURNS).await;
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
    check_parallel_turns(tests::moto::dynamo_store("bridle-parallel").await).await;
}
