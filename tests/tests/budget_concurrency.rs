//! Sixteen parallel turns of one user against a nearly spent cap, through the real engine, on
//! SQLite and on DynamoDB (moto). The model spends every output token it is allowed (usage =
//! the request's `max_tokens`, the worst case), so only the budget's lowering of `max_tokens`
//! keeps the settled total within the cap: never past it when the input estimate is right, and
//! past it by at most the input under-estimate of the calls in flight when it is not (the bound
//! `BudgetGuard` states).

use backend::{Reply, ScriptedModel};
use budget::config::Cap;
use budget::{Bucket, BudgetConfig, PriceTable, Source, estimate_input_tokens, lines};
use engine::{NullSink, TurnEnd};
use std::sync::Arc;
use store::{Adjustment, Store};
use store_sqlite::SqliteStore;
use tests::budget_turns::{NOW, conversations, engine, turn_input};
use transcript::Usage;

const TURNS: usize = 16;
/// What the engine asks for on every call (the default): far more than the cap has left.
const MAX_TOKENS: u64 = 16_000;
const FLOOR: u64 = 1_000;

/// The cap a scenario nearly spends.
#[derive(Clone, Copy)]
struct Scenario {
    bucket: Bucket,
    /// Input tokens the provider counts beyond the budget's estimate, per call.
    input_overrun: u64,
}

fn cap(limit: u64) -> Cap {
    Cap {
        limit: Some(limit),
        source: Source::Default,
    }
}

/// Every cap off but the scenario's; `test-model` costs $1 per million input tokens and $10
/// per million output tokens (1 and 10 micro-dollars a token).
fn config(bucket: Bucket, limit: u64) -> BudgetConfig {
    let off = Cap {
        limit: None,
        source: Source::Default,
    };
    let mut c = BudgetConfig {
        prices: PriceTable::with_file(
            "test-prices.json",
            r#"{"models": {"test-model": {"input": 1, "output": 10, "cache_read": 0.1, "cache_write": 2}}}"#,
        )
        .unwrap(),
        user_tokens_per_minute: off.clone(),
        user_tokens_per_hour: off.clone(),
        user_usd_30d: off.clone(),
        global_usd_30d: off,
        min_output_tokens: FLOOR,
        ..BudgetConfig::default()
    };
    match bucket {
        Bucket::UserTokensHour => c.user_tokens_per_hour = cap(limit),
        Bucket::UserUsd30d => c.user_usd_30d = cap(limit),
        other => panic!("no scenario for {}", other.name()),
    }
    c
}

/// What `input` input and `output` output tokens count in `bucket`.
fn amount(bucket: Bucket, input: u64, output: u64) -> u64 {
    match bucket {
        Bucket::UserTokensHour => input + output,
        _ => input + 10 * output,
    }
}

/// The input tokens the budget estimates for one call of these turns, measured on a throwaway
/// engine without caps.
async fn estimated_input() -> u64 {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    conversations(store.as_ref(), TURNS).await;
    let model = Arc::new(ScriptedModel::new([Reply::text("ok")]));
    let mut c = config(Bucket::UserTokensHour, u64::MAX / 4);
    c.user_tokens_per_hour.limit = None;
    let probe = engine(store, model.clone(), c);
    probe.run_turn(turn_input(0), &NullSink).await.unwrap();
    let request = &model.requests()[0];
    assert_eq!(u64::from(request.settings.max_tokens), MAX_TOKENS);
    estimate_input_tokens(request)
}

/// Spend the scenario's bucket up to `cap - left`, then run the turns at once.
async fn check(store: Arc<dyn Store>, s: Scenario) {
    let input = estimated_input().await;
    let full = amount(s.bucket, input, MAX_TOKENS);
    // Room for two full calls and a third at half its wish: enough output for the third (past
    // the floor), and then not enough for a fourth.
    let left = 2 * full + amount(s.bucket, input, MAX_TOKENS / 2);
    let cap = 1_000_000_000;
    let key = s.bucket.key(&"ana".into(), &"".into(), NOW);
    store
        .adjust(&[Adjustment {
            bucket: key.clone(),
            delta: (cap - left) as i64,
            expires_at_ms: key.start_ms + s.bucket.length_ms(),
        }])
        .await
        .unwrap();
    conversations(store.as_ref(), TURNS).await;
    let real = Usage {
        input_tokens: input + s.input_overrun,
        ..Usage::default()
    };
    let model = Arc::new(ScriptedModel::repeating(vec![
        Reply::text("Here is your week.")
            .usage(real)
            .spending_max_tokens(),
    ]));
    let engine = Arc::new(engine(store.clone(), model.clone(), config(s.bucket, cap)));
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
                assert_eq!(outcome.reply, lines::tripped(s.bucket));
                assert_eq!(
                    outcome.usage,
                    Usage::default(),
                    "a refused turn spent nothing"
                );
            }
            other => panic!("unexpected end {other:?}"),
        }
    }
    let mut allowed: Vec<u64> = model
        .requests()
        .iter()
        .map(|r| u64::from(r.settings.max_tokens))
        .collect();
    allowed.sort_unstable();
    assert_eq!(
        allowed.len(),
        answered,
        "refused turns never reached the model"
    );
    assert!(
        allowed.iter().all(|&t| (FLOOR..=MAX_TOKENS).contains(&t)),
        "every call was sent with an allowance between the floor and its wish: {allowed:?}"
    );
    let spent: u64 = allowed
        .iter()
        .map(|&out| amount(s.bucket, input + s.input_overrun, out))
        .sum();
    let used = store.bucket_usage(&[key]).await.unwrap()[0];
    assert_eq!(
        used,
        cap - left + spent,
        "settled to the usage the model reported"
    );
    // The bound: the cap, plus the input under-estimate of each call in flight (at most every
    // answered call).
    let bound = answered as u64 * amount(s.bucket, s.input_overrun, 0);
    assert!(
        used <= cap + bound,
        "used {used} passes cap {cap} by more than {bound} (allowances {allowed:?})"
    );
    if s.input_overrun == 0 {
        // Nothing settles above its reservation, so the order of events does not matter: two
        // full calls, one lowered to exactly what was left, and no room for a fourth.
        assert_eq!(allowed, vec![MAX_TOKENS / 2, MAX_TOKENS, MAX_TOKENS]);
        assert_eq!(used, cap, "the cap spent to the last unit, not one past it");
    } else {
        // The third call gets a little less when the first two settled (above their
        // reservations) before it reserved, but always more than the floor.
        assert_eq!(answered, 3, "{allowed:?}");
        assert_eq!(allowed[1..], [MAX_TOKENS, MAX_TOKENS]);
    }
}

/// A turn whose call would have room for one output token less than the floor is answered
/// with the bucket's sentence, and the model never sees it.
#[tokio::test]
async fn room_below_the_floor_is_refused_before_the_model() {
    let input = estimated_input().await;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
    conversations(store.as_ref(), TURNS).await;
    let cap = 1_000_000;
    let key = Bucket::UserTokensHour.key(&"ana".into(), &"".into(), NOW);
    let spent = cap - (input + FLOOR - 1);
    store
        .adjust(&[Adjustment {
            bucket: key.clone(),
            delta: spent as i64,
            expires_at_ms: key.start_ms + Bucket::UserTokensHour.length_ms(),
        }])
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new([Reply::text("never said")]));
    let engine = engine(
        store.clone(),
        model.clone(),
        config(Bucket::UserTokensHour, cap),
    );
    let outcome = engine.run_turn(turn_input(0), &NullSink).await.unwrap();
    assert_eq!(outcome.end, TurnEnd::Denied);
    assert_eq!(outcome.reply, lines::USER_TOKENS_HOUR);
    assert!(model.requests().is_empty(), "no model call");
    assert_eq!(
        store.bucket_usage(&[key]).await.unwrap()[0],
        spent,
        "nothing reserved"
    );
}

const HOUR_EXACT: Scenario = Scenario {
    bucket: Bucket::UserTokensHour,
    input_overrun: 0,
};
const DOLLARS_EXACT: Scenario = Scenario {
    bucket: Bucket::UserUsd30d,
    input_overrun: 0,
};
/// The provider counts 300 input tokens more than the estimate on every call.
const DOLLARS_UNDER_ESTIMATED: Scenario = Scenario {
    bucket: Bucket::UserUsd30d,
    input_overrun: 300,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_turns_on_sqlite_spend_the_hour_cap_exactly() {
    check(Arc::new(SqliteStore::open_in_memory().unwrap()), HOUR_EXACT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_turns_on_sqlite_spend_the_dollar_cap_exactly() {
    check(
        Arc::new(SqliteStore::open_in_memory().unwrap()),
        DOLLARS_EXACT,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_turns_on_sqlite_pass_the_cap_by_no_more_than_the_input_under_estimate() {
    check(
        Arc::new(SqliteStore::open_in_memory().unwrap()),
        DOLLARS_UNDER_ESTIMATED,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_turns_on_dynamodb_spend_the_hour_cap_exactly() {
    check(
        tests::moto::dynamo_store("bridle-budget-hour").await,
        HOUR_EXACT,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_turns_on_dynamodb_spend_the_dollar_cap_exactly() {
    check(
        tests::moto::dynamo_store("bridle-budget-usd").await,
        DOLLARS_EXACT,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_turns_on_dynamodb_pass_the_cap_by_no_more_than_the_input_under_estimate() {
    check(
        tests::moto::dynamo_store("bridle-budget-over").await,
        DOLLARS_UNDER_ESTIMATED,
    )
    .await;
}
