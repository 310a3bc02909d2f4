//! Budgets and cheap guards through the real engine (scripted model, SQLite), the budget guard
//! on DynamoDB (moto), and the finance report's three formats.

use backend::{ChatRequest, Reply};
use bridle::budget_report::{Format, ReportOptions, report};
use budget::config::Cap;
use budget::{
    Bucket, BudgetConfig, BudgetGuard, Guards, InMemoryAccounts, PriceTable, Source,
    StandardGuards, lines,
};
use engine::{Guard, GuardCall, TurnEnd};
use std::sync::Arc;
use store::BudgetLedger;
use store_sqlite::SqliteStore;
use tests::Harness;
use transcript::{Conversation, Usage};

const NOW: i64 = 1_800_000_030_000;

fn cap(limit: Option<u64>) -> Cap {
    Cap {
        limit,
        source: Source::Default,
    }
}

fn config(set: impl FnOnce(&mut BudgetConfig)) -> BudgetConfig {
    let mut c = BudgetConfig {
        prices: PriceTable::with_file(
            "test-prices.json",
            r#"{"models": {"test-model": {"input": 1, "output": 10, "cache_read": 0.1, "cache_write": 2}}}"#,
        )
        .unwrap(),
        ..BudgetConfig::default()
    };
    set(&mut c);
    c
}

struct Guarded {
    h: Harness,
    ledger: Arc<SqliteStore>,
    accounts: Arc<InMemoryAccounts>,
}

async fn guarded(replies: Vec<Reply>, config: BudgetConfig, no_model: Option<&str>) -> Guarded {
    let ledger = Arc::new(SqliteStore::open_in_memory().unwrap());
    let accounts = Arc::new(InMemoryAccounts::default());
    let guards = Guards::standard(StandardGuards {
        ledger: ledger.clone(),
        config: Arc::new(config),
        accounts: accounts.clone(),
        clock: Arc::new(|| NOW),
        no_model: no_model.map(str::to_owned),
    });
    let h = Harness::with_guard(replies, Arc::new(guards)).await;
    Guarded {
        h,
        ledger,
        accounts,
    }
}

/// Tokens counted this minute for the harness's user and conversation.
async fn minute_tokens(g: &Guarded) -> u64 {
    g.ledger
        .bucket_usage(&[Bucket::UserTokensMinute.key(&"user-1".into(), &"conv-1".into(), NOW)])
        .await
        .unwrap()[0]
}

#[tokio::test]
async fn a_tripped_budget_is_its_sentence_and_no_model_call() {
    // A cap of 10 tokens a minute cannot fit any request.
    let g = guarded(
        vec![Reply::text("never said")],
        config(|c| c.user_tokens_per_minute = cap(Some(10))),
        None,
    )
    .await;
    let t = g.h.turn("hello").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied);
    assert_eq!(t.outcome.reply, lines::USER_TOKENS_MINUTE);
    assert!(g.h.model.requests().is_empty(), "no model call");
    let visible = g.h.visible().await;
    assert_eq!(visible.last().unwrap().text, lines::USER_TOKENS_MINUTE);
}

#[tokio::test]
async fn a_turn_with_tools_reserves_and_settles_every_model_call() {
    let g = guarded(
        vec![
            Reply::tool_call("t1", "get_time", serde_json::json!({})),
            Reply::text("It is noon.").usage(Usage {
                input_tokens: 300,
                output_tokens: 20,
                cache_read_tokens: 1_000,
                cache_write_tokens: 0,
            }),
        ],
        config(|_| {}),
        None,
    )
    .await;
    let t = g.h.turn("what time is it?").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered, "{}", t.outcome.reply);
    assert_eq!(g.h.model.requests().len(), 2);
    let tokens = minute_tokens(&g).await;
    let calls = g.h.transcript().await;
    let real: u64 = calls
        .iter()
        .filter_map(|m| m.call.as_ref())
        .map(|c| c.usage.total())
        .sum();
    assert!(real > 0);
    assert_eq!(tokens, real, "both calls settled to their real usage");
}

#[tokio::test(start_paused = true)]
async fn a_call_that_breaks_half_way_is_charged_its_whole_allowance_not_what_it_showed() {
    // 40 characters stream, then the provider fails; the retry is refused (something streamed).
    // What showed says nothing of what was produced (a tool call's input is held back until
    // complete), so the whole allowance is charged: never what showed, never nothing.
    let g = guarded(
        vec![
            Reply::new()
                .say("Here is a start of an answer that breaks")
                .then_fail(backend::BackendError::Overloaded),
        ],
        config(|_| {}),
        None,
    )
    .await;
    let t = g.h.turn("hello").await;
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
    let tokens = minute_tokens(&g).await;
    let request = &g.h.model.requests()[0];
    let input = budget::estimate_input_tokens(request);
    let allowance = u64::from(request.settings.max_tokens);
    assert_eq!(
        tokens,
        input + allowance,
        "the request's estimate plus the allowance; not 40 streamed characters / 4, not zero"
    );
}

#[tokio::test]
async fn a_call_without_reported_usage_in_another_script_is_charged_by_its_bytes() {
    // 40 Chinese characters (120 bytes, about a token each) stream, and the provider reports
    // no usage: charged 30 tokens of output, where characters / 4 would have charged 10.
    let said = "这是一个会在中途失败的回答".repeat(3) + "一";
    assert_eq!(said.chars().count(), 40);
    let g = guarded(
        vec![
            Reply::new()
                .say(&said)
                .usage(transcript::Usage::default())
                .stop(transcript::StopReason::EndTurn),
        ],
        config(|_| {}),
        None,
    )
    .await;
    let t = g.h.turn("你好").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered);
    let tokens = minute_tokens(&g).await;
    let request = &g.h.model.requests()[0];
    assert_eq!(tokens, budget::estimate_input_tokens(request) + 30);
}

#[tokio::test]
async fn a_call_cut_while_its_output_was_held_back_keeps_its_whole_reservation() {
    // The provider had started (only a keep-alive came: a tool call's input is held back until
    // complete) when it failed: the input was read and any of the allowance may have come out,
    // so its reservation stands, not released as free. The retry is charged what it reports.
    let g = guarded(
        vec![
            Reply::new()
                .keep_alive()
                .then_fail(backend::BackendError::Overloaded),
            Reply::text("Hello there."),
        ],
        config(|_| {}),
        None,
    )
    .await;
    let t = g.h.turn("hello").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered);
    let requests = g.h.model.requests();
    assert_eq!(requests.len(), 2, "tried again once");
    let tokens = minute_tokens(&g).await;
    let allowance = u64::from(requests[0].settings.max_tokens).min(16_000);
    let cut = budget::estimate_input_tokens(&requests[0]) + allowance;
    let answered = 10 + 2;
    assert_eq!(tokens, cut + answered);
}

#[tokio::test(start_paused = true)]
async fn a_call_that_times_out_before_its_first_event_keeps_its_input() {
    // The first call is sent and nothing comes back in time (a slow first token under load, a
    // long input): the provider may have read it all, so its input is counted (no output came,
    // so none is); the retry is charged what it reports. Released in full, a sender could have
    // the provider read long inputs for free, twice a message.
    let g = guarded(
        vec![Reply::new().then_stall(), Reply::text("Hello there.")],
        config(|_| {}),
        None,
    )
    .await;
    let t = g.h.turn("hello").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered);
    let requests = g.h.model.requests();
    assert_eq!(requests.len(), 2, "tried again once");
    let tokens = minute_tokens(&g).await;
    let answered = 10 + 2;
    assert_eq!(
        tokens,
        budget::estimate_input_tokens(&requests[0]) + answered
    );
}

#[tokio::test]
async fn a_paused_account_is_answered_without_the_model() {
    let g = guarded(vec![Reply::text("never said")], config(|_| {}), None).await;
    g.accounts.pause(&"user-1".into());
    let t = g.h.turn("hello").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied);
    assert_eq!(t.outcome.reply, lines::ACCOUNT_PAUSED);
    assert!(g.h.model.requests().is_empty());
    // Nothing was reserved for a call that never happened.
    let used = g
        .ledger
        .bucket_usage(&[Bucket::UserTokensMinute.key(&"user-1".into(), &"conv-1".into(), NOW)])
        .await
        .unwrap();
    assert_eq!(used, vec![0]);
}

#[tokio::test]
async fn a_busy_conversation_gets_the_busy_note_without_the_model() {
    let g = guarded(
        vec![Reply::text("one"), Reply::text("two"), Reply::text("three")],
        config(|c| c.conversation_messages_per_hour = cap(Some(2))),
        None,
    )
    .await;
    assert_eq!(g.h.turn("a").await.outcome.end, TurnEnd::Answered);
    assert_eq!(g.h.turn("b").await.outcome.end, TurnEnd::Answered);
    let t = g.h.turn("c").await;
    assert_eq!(t.outcome.reply, lines::CONVERSATION_BUSY);
    assert_eq!(
        g.h.model.requests().len(),
        2,
        "the third message made no model call"
    );
}

#[tokio::test]
async fn no_model_configured_is_the_plain_line_without_a_model_call() {
    let g = guarded(
        vec![Reply::text("never said")],
        config(|_| {}),
        Some(bridle::backends::UNPLUGGED),
    )
    .await;
    let t = g.h.turn("hello").await;
    assert_eq!(t.outcome.reply, bridle::backends::UNPLUGGED);
    assert!(g.h.model.requests().is_empty());
}

/// 16 calls of one user at once against a DynamoDB ledger (moto) whose minute cap fits five
/// reservations: exactly five go through, and the bucket holds exactly five reservations.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_calls_on_dynamodb_never_pass_the_cap() {
    let ledger = tests::moto::dynamo_store("bridle-budget").await;
    let config = Arc::new(config(|c| {
        c.output_allowance = 100;
        c.user_tokens_per_minute = cap(Some(5 * 1_000));
    }));
    let guard = Arc::new(BudgetGuard::new(ledger.clone(), config, Arc::new(|| NOW)));
    let request = ChatRequest {
        model: "test-model".into(),
        system: "x".repeat(3_596), // 899 + 1 (`[]` twice) = 900 tokens + 100 allowance
        messages: vec![],
        tools: Default::default(),
        settings: Default::default(),
    };
    let request = Arc::new(request);
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (guard, request) = (guard.clone(), request.clone());
        tasks.push(tokio::spawn(async move {
            let conv = Conversation::new(format!("c{i}"), "ana", "web", "chat");
            guard
                .before_model_call(&GuardCall {
                    conversation: &conv,
                    call_number: 1,
                    request: &request,
                    account: None,
                })
                .await
        }));
    }
    let mut allowed = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => allowed += 1,
            Err(denied) => assert_eq!(denied.user_message, lines::USER_TOKENS_MINUTE),
        }
    }
    assert_eq!(allowed, 5);
    let used = ledger
        .bucket_usage(&[Bucket::UserTokensMinute.key(&"ana".into(), &"".into(), NOW)])
        .await
        .unwrap();
    assert_eq!(
        used,
        vec![5_000],
        "never past the cap; denied calls added nothing"
    );
}

/// A ledger with two users and three conversations, written by the real guard.
async fn spent_ledger() -> (Arc<SqliteStore>, BudgetConfig) {
    let ledger = Arc::new(SqliteStore::open_in_memory().unwrap());
    let config = config(|c| {
        c.user_usd_30d = cap(Some(10_000));
        c.output_allowance = 0;
    });
    let guard = BudgetGuard::new(ledger.clone(), Arc::new(config.clone()), Arc::new(|| NOW));
    let request = ChatRequest {
        model: "test-model".into(),
        system: "hi".into(),
        messages: vec![],
        tools: Default::default(),
        settings: Default::default(),
    };
    for (user, conv, output) in [
        ("ana", "c-a1", 500),
        ("ana", "c-a2", 100),
        ("bo", "c-b1", 800),
    ] {
        let conv = Conversation::new(conv, user, "web", "chat");
        let permit = guard
            .before_model_call(&GuardCall {
                conversation: &conv,
                call_number: 1,
                request: &request,
                account: None,
            })
            .await
            .unwrap();
        let usage = Usage {
            input_tokens: 1_000,
            output_tokens: output,
            ..Usage::default()
        };
        guard.after_model_call(&conv, permit, &usage).await;
    }
    (ledger, config)
}

fn options(format: Format) -> ReportOptions {
    ReportOptions {
        format,
        top: 10,
        now_ms: NOW,
    }
}

#[tokio::test]
async fn the_report_as_json_has_usage_caps_prices_and_top_conversations() {
    let (ledger, config) = spent_ledger().await;
    let text = report(ledger.as_ref(), &config, &options(Format::Json))
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let usage = json["usage"].as_array().unwrap();
    // The global row first: 3 × 1,000 in at $1/M + 1,400 out at $10/M = 3,000 + 14,000 µ$.
    assert_eq!(usage[0]["subject"], "*");
    assert_eq!(usage[0]["bucket"], "global_usd_30d");
    assert_eq!(usage[0]["used"], 17_000);
    // Then the strangers' (what replies to senders not linked yet cost): nothing here.
    assert_eq!(usage[1]["subject"], budget::report::STRANGERS);
    assert_eq!(usage[1]["bucket"], "unlinked_usd_30d");
    assert_eq!(
        (usage[1]["used"].as_u64(), usage[1]["cap"].as_u64()),
        (Some(0), Some(20_000_000))
    );
    let ana_usd = usage
        .iter()
        .find(|r| r["subject"] == "ana" && r["bucket"] == "user_usd_30d")
        .unwrap();
    // ana: 2,000 in + 600 out = 2,000 + 6,000 = 8,000 µ$ of a 10,000 µ$ cap.
    assert_eq!(ana_usd["used"], 8_000);
    assert_eq!(ana_usd["cap"], 10_000);
    assert_eq!(ana_usd["fill"], 0.8);
    let top: Vec<&str> = json["top_conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["conversation"].as_str().unwrap())
        .collect();
    assert_eq!(top, ["c-b1", "c-a1", "c-a2"], "most expensive first");
    let caps = json["caps"].as_array().unwrap();
    assert!(
        caps.iter()
            .any(|c| c["bucket"] == "user_tokens_minute" && c["source"]["kind"] == "default")
    );
    let prices = json["prices"].as_array().unwrap();
    let test_model = prices.iter().find(|p| p["model"] == "test-model").unwrap();
    assert_eq!(test_model["output"], 10_000_000);
    assert_eq!(test_model["source"]["kind"], "file");
    assert_eq!(test_model["source"]["name"], "test-prices.json");
}

#[tokio::test]
async fn the_report_as_csv_parses_into_the_same_numbers() {
    let (ledger, config) = spent_ledger().await;
    let text = report(ledger.as_ref(), &config, &options(Format::Csv))
        .await
        .unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().unwrap().clone();
    assert_eq!(
        header.iter().collect::<Vec<_>>(),
        [
            "section", "subject", "item", "unit", "value", "cap", "fill", "source"
        ]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let find = |section: &str, subject: &str, item: &str| {
        rows.iter()
            .find(|r| &r[0] == section && &r[1] == subject && &r[2] == item)
            .unwrap_or_else(|| panic!("no {section}/{subject}/{item} row"))
            .clone()
    };
    let bo = find("usage", "bo", "user_usd_30d");
    assert_eq!(
        (&bo[3], &bo[4], &bo[5], &bo[6]),
        ("usd", "0.009", "0.01", "0.9000")
    );
    assert_eq!(&find("usage", "*", "global_usd_30d")[4], "0.017");
    assert_eq!(
        &find("conversation", "c-a2", "conversation_usd_30d")[4],
        "0.002"
    );
    assert_eq!(&find("price", "test-model", "cache_read")[4], "0.1");
    assert_eq!(
        &find("price", "test-model", "cache_read")[7],
        "file test-prices.json"
    );
    assert_eq!(&find("cap", "", "conversation_messages_hour")[4], "60");
}

#[tokio::test]
async fn the_report_as_a_table_lists_users_windows_and_sources() {
    let (ledger, config) = spent_ledger().await;
    let text = report(ledger.as_ref(), &config, &options(Format::Table))
        .await
        .unwrap();
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        line("(everyone)"),
        ["(everyone)", "global_usd_30d", "$0.02", "$500.00", "0.0%"]
    );
    let ana: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ana "))
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(
        ana,
        ["user_tokens_minute", "user_tokens_hour", "user_usd_30d"]
    );
    assert_eq!(line("c-b1"), ["c-b1", "$0.01"]);
    assert!(line("test-model").ends_with(&["file", "test-prices.json"]));
}

#[tokio::test]
async fn a_compaction_the_rate_refuses_leaves_the_turns_own_call_counted_against_the_rate() {
    // From the second turn on, the history is past the compaction threshold. Over the rate, the compaction is
    // refused and skipped; the turn's own call must then meet the rate as its first call, not
    // go through unmetered as the second.
    let ledger = Arc::new(SqliteStore::open_in_memory().unwrap());
    let guards = Guards::standard(StandardGuards {
        ledger: ledger.clone(),
        config: Arc::new(config(|c| c.conversation_messages_per_hour = cap(Some(1)))),
        accounts: Arc::new(InMemoryAccounts::default()),
        clock: Arc::new(|| NOW),
        no_model: None,
    });
    let options = engine::EngineOptions {
        compaction_threshold_chars: 1,
        ..engine::EngineOptions::default()
    };
    let h = Harness::build(
        vec![Reply::text("one"), Reply::text("never said")],
        None,
        options,
        Some(Arc::new(guards)),
    )
    .await;
    assert_eq!(h.turn("a").await.outcome.reply, "one");
    let t = h.turn("b").await;
    assert_eq!(t.outcome.reply, lines::CONVERSATION_BUSY);
    assert_eq!(
        h.model.requests().len(),
        1,
        "the first turn's answer; nothing for the message over the rate"
    );
}

/// Four large PDFs in a conversation: each call's estimate alone passed the per-minute token
/// cap while the segment's characters stayed far under compaction's threshold, so every call
/// was refused ("give me a moment") for good. They weigh against the threshold what the budget
/// estimates them at, so the segment is compacted (its notes request names each file in a
/// line) and the turn is answered.
#[tokio::test]
async fn a_conversation_of_large_documents_is_compacted_not_refused_for_good() {
    let g = guarded(
        vec![
            Reply::text("Notes: four reports were shared."),
            Reply::text("They are four reports."),
        ],
        config(|_| {}),
        None,
    )
    .await;
    for position in 0..4 {
        let row = transcript::Message {
            conversation_id: g.h.conversation.clone(),
            segment: 0,
            position,
            role: transcript::Role::User,
            parts: vec![
                transcript::Part::text("here is one"),
                transcript::Part::Document(transcript::MediaRef {
                    key: format!("media/report-{position}.pdf"),
                    mime_type: "application/pdf".into(),
                    size_bytes: 400_000,
                }),
            ],
            call: None,
            action_id: Some(format!("web#old-{position}")),
            created_at_ms: NOW - 600_000,
        };
        store::MessageStore::append_message(g.h.store.as_ref(), &row)
            .await
            .unwrap();
    }
    let t = g.h.turn("what are they?").await;
    assert_eq!(t.outcome.reply, "They are four reports.");
    let requests = g.h.model.requests();
    assert_eq!(requests.len(), 2, "the notes request, then the answer");
    let documents = |r: &ChatRequest| {
        r.messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter(|p| matches!(p, transcript::Part::Document(_)))
            .count()
    };
    assert_eq!(documents(&requests[0]), 0, "the notes request names them");
    assert_eq!(
        documents(&requests[1]),
        0,
        "the new segment opens with the notes"
    );
}
