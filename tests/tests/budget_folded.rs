//! A model call's budget reservation rides in the write before it where the store is the
//! ledger: the first call's in the turn's start, each later one's in the tool message. It never
//! gets a call past a cap: a reservation that does not fit is dropped, the start or the tool
//! message is written on its own, and the guard reserves as before — a smaller allowance, or the
//! budget's sentence and no call. A turn that makes no call reserves nothing. Through the real
//! engine and job path on one SQLite store that is also the budget's ledger, as `bridle serve`
//! wires it.

use backend::Reply;
use budget::config::Cap;
use budget::{Bucket, BudgetConfig, PriceTable, Source, lines};
use engine::{EngineOptions, TurnEnd};
use serde_json::json;
use std::sync::Arc;
use store::{BudgetLedger, Charge, ConversationStore};
use store_sqlite::SqliteStore;
use tests::budget_turns::NOW;
use tests::{Calls, Harness, sample_tools};
use transcript::{ConversationStatus, Part, Role, Usage};

/// Usage a scripted answer reports: `input` tokens in, 20 out.
fn usage(input: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: 20,
        ..Usage::default()
    }
}

/// The engine on `store`, its budget's ledger the same store, with `tokens_per_minute` as the
/// user's cap (the default allowance: 16,000 output tokens a call, at least 1,000).
async fn on_one_store(replies: Vec<Reply>, tokens_per_minute: Option<u64>) -> Harness {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let config = BudgetConfig {
        prices: PriceTable::with_file(
            "test-prices.json",
            r#"{"models": {"test-model": {"input": 1, "output": 10, "cache_read": 0.1, "cache_write": 2}}}"#,
        )
        .unwrap(),
        user_tokens_per_minute: Cap {
            limit: tokens_per_minute,
            source: Source::Default,
        },
        ..BudgetConfig::default()
    };
    let guards = tests::budget_turns::guards(store.clone(), config);
    Harness::build_on(
        store,
        replies,
        sample_tools(Calls::default()),
        EngineOptions::default(),
        |engine| engine.with_guard(Arc::new(guards)),
    )
    .await
}

async fn tokens_this_minute(h: &Harness) -> u64 {
    let key = Bucket::UserTokensMinute.key(&"user-1".into(), &h.conversation, NOW);
    h.store.bucket_usage(&[key]).await.unwrap()[0]
}

/// The real usage of every model call the transcript records.
async fn real_usage(h: &Harness) -> u64 {
    h.transcript()
        .await
        .iter()
        .filter_map(|m| m.call.as_ref())
        .map(|c| c.usage.total())
        .sum()
}

/// Whether the transcript holds `list_events`'s result for call `id`.
async fn has_result(h: &Harness, id: &str) -> bool {
    h.transcript().await.iter().any(|m| {
        m.role == Role::Tool
            && m.parts.iter().any(|p| {
                matches!(p, Part::ToolResult { tool_use_id, is_error: false, .. } if tool_use_id == id)
            })
    })
}

/// Charge `amount` to the user's minute ahead of the test's turns.
async fn used_before(h: &Harness, amount: u64) {
    let bucket = Bucket::UserTokensMinute.key(&"user-1".into(), &h.conversation, NOW);
    let charge = Charge {
        bucket,
        amount,
        limit: None,
        expires_at_ms: NOW + 3_600_000,
    };
    h.store.reserve(&[charge]).await.unwrap();
}

#[tokio::test]
async fn a_turn_starts_with_its_first_reservation_in_one_write() {
    let h = on_one_store(
        vec![
            Reply::text("Hello.").usage(usage(100)),
            Reply::text("Hello again.").usage(usage(200)),
        ],
        Some(1_000_000),
    )
    .await;
    let writes = || h.store.db().calls().writes;
    for (n, said) in ["hello", "hello?"].into_iter().enumerate() {
        let before = writes();
        let t = h.turn(said).await;
        assert_eq!(t.outcome.end, TurnEnd::Answered, "{}", t.outcome.reply);
        // The job's claim with the lease; the start with the call's reservation; the answer
        // with its settlement; the finish. (The reservation on its own: 5.)
        assert_eq!(writes() - before, 4, "turn {n}");
    }
    assert_eq!(
        h.model
            .requests()
            .iter()
            .map(|r| r.settings.max_tokens)
            .collect::<Vec<_>>(),
        [16_000, 16_000],
        "the whole allowance, reserved with the start"
    );
    assert_eq!(h.transcript().await.len(), 4);
    assert_eq!(
        tokens_this_minute(&h).await,
        real_usage(&h).await,
        "each reservation written with its turn's start settled to real usage"
    );
    assert_eq!(real_usage(&h).await, 120 + 220);
}

#[tokio::test]
async fn a_first_reservation_that_does_not_fit_with_the_start_shrinks_the_allowance() {
    // 2,000 used already: the cap leaves less than the call's input and full allowance, more
    // than its input and the 1,000-token minimum.
    let cap = 2_000 + 16_000 + 100;
    let h = on_one_store(vec![Reply::text("Noon.").usage(usage(50))], Some(cap)).await;
    used_before(&h, 2_000).await;
    let t = h.turn("what time is it?").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered, "{}", t.outcome.reply);
    let requests = h.model.requests();
    assert_eq!(requests.len(), 1);
    let lowered = requests[0].settings.max_tokens;
    assert!(
        (1_000..16_000).contains(&lowered),
        "the call gets what is left, not the whole allowance: {lowered}"
    );
    let transcript = h.transcript().await;
    assert_eq!(
        transcript.len(),
        2,
        "the turn started on its own: {transcript:?}"
    );
    assert_eq!(transcript[0].role, Role::User);
    assert_eq!(tokens_this_minute(&h).await, 2_000 + 70);
}

#[tokio::test]
async fn a_first_reservation_no_cap_allows_is_the_budgets_sentence_and_no_call() {
    let h = on_one_store(vec![Reply::text("never said")], Some(2_000)).await;
    used_before(&h, 1_900).await;
    let t = h.turn("what time is it?").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied);
    assert!(
        t.outcome.reply.ends_with(lines::USER_TOKENS_MINUTE),
        "{}",
        t.outcome.reply
    );
    assert!(h.model.requests().is_empty(), "no call");
    let transcript = h.transcript().await;
    assert_eq!(transcript[0].role, Role::User, "the user's message is kept");
    assert_eq!(
        tokens_this_minute(&h).await,
        1_900,
        "the refused reservation left nothing behind"
    );
}

#[tokio::test]
async fn a_turn_that_makes_no_model_call_reserves_nothing() {
    let h = on_one_store(vec![Reply::text("unused")], Some(1_000_000)).await;
    let mut conv = h
        .store
        .conversation(&h.conversation)
        .await
        .unwrap()
        .unwrap();
    conv.status = ConversationStatus::Paused;
    h.store.update_conversation(&conv).await.unwrap();
    let t = h.turn("hello?").await;
    assert_eq!(t.outcome.end, TurnEnd::Paused);
    assert!(h.model.requests().is_empty());
    assert_eq!(h.transcript().await.len(), 1, "the user's message is kept");
    assert_eq!(tokens_this_minute(&h).await, 0, "nothing reserved");
}

#[tokio::test]
async fn a_tool_round_costs_one_write_less_and_every_call_is_settled() {
    let h = on_one_store(
        vec![
            Reply::text("Hello.").usage(usage(100)),
            Reply::tool_call("t1", "list_events", json!({})).usage(usage(200)),
            Reply::text("It is noon.").usage(usage(300)),
        ],
        Some(1_000_000),
    )
    .await;
    let writes = || h.store.db().calls().writes;
    let before = writes();
    assert_eq!(h.turn("hello").await.outcome.end, TurnEnd::Answered);
    let plain = writes() - before;
    let before = writes();
    let t = h.turn("what time is it?").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered, "{}", t.outcome.reply);
    let tool_round = writes() - before - plain;
    // `list_events` writes nothing of its own: the tool message with its result and the next
    // call's reservation, then that call's answer with its settlement.
    assert_eq!(tool_round, 2, "a plain turn made {plain} writes");
    assert!(has_result(&h, "t1").await);
    assert_eq!(
        tokens_this_minute(&h).await,
        real_usage(&h).await,
        "every reservation, the one written with the tool message too, settled to real usage"
    );
    assert_eq!(real_usage(&h).await, 120 + 220 + 320);
}

#[tokio::test]
async fn a_reservation_that_does_not_fit_with_the_tool_message_shrinks_the_next_allowance() {
    // After the first call (2,000 tokens) the cap leaves 16,100: less than the next call's
    // input and full allowance, more than its input and the 1,000-token minimum.
    let first = 2_000;
    let cap = first + 16_000 + 100;
    let h = on_one_store(
        vec![
            Reply::tool_call("t1", "list_events", json!({})).usage(usage(first - 20)),
            Reply::text("It is noon.").usage(usage(50)),
        ],
        Some(cap),
    )
    .await;
    let t = h.turn("what time is it?").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered, "{}", t.outcome.reply);
    let requests = h.model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].settings.max_tokens, 16_000);
    let lowered = requests[1].settings.max_tokens;
    assert!(
        (1_000..16_000).contains(&lowered),
        "the second call gets what is left, not the whole allowance: {lowered}"
    );
    assert!(
        has_result(&h, "t1").await,
        "the tool message is written on its own"
    );
    assert_eq!(tokens_this_minute(&h).await, real_usage(&h).await);
    assert!(tokens_this_minute(&h).await <= cap);
}

#[tokio::test]
async fn a_reservation_no_cap_allows_is_the_budgets_sentence_and_no_call() {
    // After the first call nothing is left that fits even the minimum output.
    let first = 2_000;
    let h = on_one_store(
        vec![
            Reply::tool_call("t1", "list_events", json!({})).usage(usage(first - 20)),
            Reply::text("never said").usage(usage(50)),
        ],
        Some(first + 16_000 + 100 - 15_500),
    )
    .await;
    let t = h.turn("what time is it?").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied);
    assert!(
        t.outcome.reply.ends_with(lines::USER_TOKENS_MINUTE),
        "{}",
        t.outcome.reply
    );
    assert_eq!(h.model.requests().len(), 1, "no second call");
    assert!(has_result(&h, "t1").await, "the tool's result is kept");
    assert_eq!(
        tokens_this_minute(&h).await,
        first,
        "the first call settled, the refused reservation left nothing behind"
    );
}

#[tokio::test]
async fn a_model_chaining_tools_is_stopped_at_the_cap_and_never_past_it() {
    // A manipulated model lists the events again and again: four cheap calls (1,000 tokens
    // each; while the next call's whole allowance fits, it rides with the tool message), then
    // 3,000 each, each allowance smaller, until nothing fits.
    let replies: Vec<Reply> = (0..12)
        .map(|i| {
            let output = if i < 4 { 900 } else { 2_900 };
            Reply::tool_call(&format!("t{i}"), "list_events", json!({})).usage(Usage {
                input_tokens: 100,
                output_tokens: output,
                ..Usage::default()
            })
        })
        .collect();
    let cap = 20_000;
    let h = on_one_store(replies, Some(cap)).await;
    let t = h.turn("what time is it?").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied, "{}", t.outcome.reply);
    let requests = h.model.requests();
    let calls = requests.len();
    assert!((5..12).contains(&calls), "{calls} calls");
    assert!(
        requests[..3]
            .iter()
            .all(|r| r.settings.max_tokens == 16_000)
            && requests[3..].iter().all(|r| r.settings.max_tokens < 16_000),
        "the whole allowance while it fits (reserved with the tool message before the call), \
         then what is left: {:?}",
        requests
            .iter()
            .map(|r| r.settings.max_tokens)
            .collect::<Vec<_>>()
    );
    let used = tokens_this_minute(&h).await;
    assert_eq!(
        used,
        real_usage(&h).await,
        "each call settled to what it used"
    );
    assert!(used <= cap, "{used} > {cap}");
    // The last call was admitted with its worst case (what was used before it, its input, its
    // allowance) under the cap.
    let last = &requests[calls - 1];
    let before = used - 3_000;
    let worst = before + budget::estimate_input_tokens(last) + u64::from(last.settings.max_tokens);
    assert!(
        worst <= cap,
        "the last call's reservation {worst} passed the cap"
    );
}
