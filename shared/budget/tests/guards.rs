//! The budget guard and the cheap guards on a real SQLite ledger, with a clock the tests move.

use backend::ChatRequest;
use budget::config::Cap;
use budget::{
    Bucket, BudgetConfig, BudgetGuard, ConversationRate, Guards, Meter, PriceTable, Source, lines,
};
use engine::{Denied, Guard, GuardCall, Permit};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use store::BudgetLedger;
use store_sqlite::SqliteStore;
use transcript::{Conversation, Usage};

const T0: i64 = 1_800_000_000_000;

struct Setup {
    ledger: Arc<SqliteStore>,
    now: Arc<AtomicI64>,
    config: Arc<BudgetConfig>,
    guard: BudgetGuard,
}

fn cap(limit: Option<u64>) -> Cap {
    Cap {
        limit,
        source: Source::Default,
    }
}

/// Caps all off; the test sets the ones it is about. Output allowance 100 tokens; the model
/// `m` costs $1 per million input, $10 per million output, $0.10 cache read, $2 cache write.
fn config(set: impl FnOnce(&mut BudgetConfig)) -> BudgetConfig {
    let prices = PriceTable::with_file(
        "test-prices.json",
        r#"{"models": {"m": {"input": 1, "output": 10, "cache_read": 0.10, "cache_write": 2}}}"#,
    )
    .unwrap();
    let mut c = BudgetConfig {
        user_tokens_per_minute: cap(None),
        user_tokens_per_hour: cap(None),
        user_usd_30d: cap(None),
        global_usd_30d: cap(None),
        conversation_messages_per_hour: cap(None),
        unlinked_usd_30d: cap(None),
        output_allowance: 100,
        output_allowance_source: Source::Default,
        min_output_tokens: 1_000,
        min_output_tokens_source: Source::Default,
        prices,
        sms_segment_usd: 0,
        sms_segment_usd_source: Source::Default,
    };
    set(&mut c);
    c
}

fn setup(config: BudgetConfig) -> Setup {
    let ledger = Arc::new(SqliteStore::open_in_memory().unwrap());
    let now = Arc::new(AtomicI64::new(Bucket::GlobalUsd30d.start(T0) + 1_000));
    let config = Arc::new(config);
    let clock_now = now.clone();
    let guard = BudgetGuard::new(
        ledger.clone(),
        config.clone(),
        Arc::new(move || clock_now.load(Ordering::SeqCst)),
    );
    Setup {
        ledger,
        now,
        config,
        guard,
    }
}

/// A request of exactly `input` estimated tokens (4 characters each, `[]` twice included).
fn request(input: u64) -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        system: "x".repeat(input as usize * 4 - 4),
        messages: vec![],
        tools: Default::default(),
        settings: Default::default(),
    }
}

fn conv(user: &str, id: &str) -> Conversation {
    Conversation::new(id, user, "web", "chat")
}

async fn call(guard: &dyn Guard, conv: &Conversation, input: u64) -> Result<Permit, Denied> {
    let req = request(input);
    guard
        .before_model_call(&GuardCall {
            conversation: conv,
            call_number: 1,
            request: &req,
            account: None,
        })
        .await
}

async fn used(ledger: &SqliteStore, b: Bucket, conv: &Conversation, now: i64) -> u64 {
    ledger
        .bucket_usage(&[b.key(&conv.user_id, &conv.id, now)])
        .await
        .unwrap()[0]
}

/// A reply's SMS segments are money in the user's, the conversation's and everyone's 30-day
/// buckets (an unlinked sender's in the strangers', the conversation's and everyone's), and a user whose
/// dollars they filled is refused the next model call, though no call cost anything.
#[tokio::test]
async fn sms_segments_count_in_the_dollar_buckets_and_trip_the_users_cap() {
    let s = setup(config(|c| {
        c.sms_segment_usd = 50_000;
        c.user_usd_30d = cap(Some(1_000_000));
    }));
    let now = s.now.load(Ordering::SeqCst);
    let ana = conv("ana", "sms:ana");
    s.guard
        .charge_segments(Some(&ana.user_id), &ana.id, 18)
        .await;
    for b in [
        Bucket::UserUsd30d,
        Bucket::ConversationUsd30d,
        Bucket::GlobalUsd30d,
    ] {
        assert_eq!(used(&s.ledger, b, &ana, now).await, 900_000, "{b:?}");
    }
    let lobby = conv("", "sms:+15550001111");
    s.guard.charge_segments(None, &lobby.id, 2).await;
    assert_eq!(
        used(&s.ledger, Bucket::ConversationUsd30d, &lobby, now).await,
        100_000
    );
    assert_eq!(
        used(&s.ledger, Bucket::GlobalUsd30d, &lobby, now).await,
        1_000_000
    );
    assert_eq!(
        used(&s.ledger, Bucket::UserUsd30d, &lobby, now).await,
        0,
        "no user's"
    );
    let strangers = |c| used(&s.ledger, Bucket::UnlinkedUsd30d, c, now);
    assert_eq!(strangers(&lobby).await, 100_000, "the strangers'");
    assert_eq!(strangers(&ana).await, 100_000, "one bucket, none of ana's");
    // Within the cap a call goes; once the segments pass it, the next is held back.
    assert!(call(&s.guard, &ana, 10).await.is_ok());
    s.guard
        .charge_segments(Some(&ana.user_id), &ana.id, 3)
        .await;
    tripped(call(&s.guard, &ana, 10).await, Bucket::UserUsd30d);
}

/// A reply that costs and that no model call guards asks first whether a dollar cap its
/// segments count in is full: the user's (for a sender not linked yet, the strangers') or
/// everyone's.
#[tokio::test]
async fn fees_are_over_the_cap_once_the_users_or_everyones_dollars_are_full() {
    let s = setup(config(|c| {
        c.sms_segment_usd = 100_000;
        c.user_usd_30d = cap(Some(300_000));
        c.global_usd_30d = cap(Some(600_000));
        c.unlinked_usd_30d = cap(Some(200_000));
    }));
    let ana = conv("ana", "sms:ana");
    let full = |user: Option<&str>| {
        let user = user.map(|u| transcript::UserId(u.into()));
        let guard = &s.guard;
        async move { guard.fees_over_cap(user.as_ref()).await.unwrap() }
    };
    assert!(!full(Some("ana")).await && !full(None).await);
    s.guard
        .charge_segments(Some(&ana.user_id), &ana.id, 3)
        .await;
    assert!(full(Some("ana")).await, "ana's $0.30 spent");
    assert!(
        !full(Some("bo")).await && !full(None).await,
        "everyone's has room"
    );
    s.guard.charge_segments(None, &"sms:lobby".into(), 2).await;
    assert!(full(None).await, "the strangers' $0.20 spent");
    assert!(!full(Some("bo")).await, "everyone's $0.60 has room still");
    s.guard
        .charge_segments(Some(&"bo".into()), &"sms:bo".into(), 1)
        .await;
    assert!(full(Some("bo")).await, "everyone's $0.60 spent");
}

/// At 0 a segment counts nothing: nothing is written.
#[tokio::test]
async fn a_free_segment_writes_nothing() {
    let s = setup(config(|_| {}));
    let ana = conv("ana", "sms:ana");
    s.guard
        .charge_segments(Some(&ana.user_id), &ana.id, 24)
        .await;
    let start = Bucket::GlobalUsd30d.start(s.now.load(Ordering::SeqCst));
    assert!(
        s.ledger
            .buckets_of_window("usd_30d", start)
            .await
            .unwrap()
            .is_empty()
    );
}

fn tripped(result: Result<Permit, Denied>, bucket: Bucket) {
    let denied = result.expect_err("the call must be denied");
    assert_eq!(denied.kind, engine::DeniedKind::Limit);
    assert_eq!(denied.reason, format!("budget:{}", bucket.name()));
    assert_eq!(denied.user_message, lines::tripped(bucket));
}

#[tokio::test]
async fn the_minute_bucket_trips_alone_and_frees_up_next_minute() {
    // Each call reserves 900 input + 100 allowance = 1,000 tokens; 2,500 per minute fits two.
    let s = setup(config(|c| c.user_tokens_per_minute = cap(Some(2_500))));
    let ana = conv("ana", "c1");
    call(&s.guard, &ana, 900).await.unwrap();
    call(&s.guard, &ana, 900).await.unwrap();
    tripped(call(&s.guard, &ana, 900).await, Bucket::UserTokensMinute);
    // Another user is not affected.
    call(&s.guard, &conv("bo", "c2"), 900).await.unwrap();
    s.now.fetch_add(60_000, Ordering::SeqCst);
    call(&s.guard, &ana, 900)
        .await
        .expect("a new minute is a new bucket");
}

/// A request of `input` estimated tokens asking for `max_tokens` of output.
fn asking(input: u64, max_tokens: u32) -> ChatRequest {
    let mut r = request(input);
    r.settings.max_tokens = max_tokens;
    r
}

async fn ask(guard: &dyn Guard, conv: &Conversation, req: &ChatRequest) -> Result<Permit, Denied> {
    guard
        .before_model_call(&GuardCall {
            conversation: conv,
            call_number: 1,
            request: req,
            account: None,
        })
        .await
}

#[tokio::test]
async fn a_call_is_given_the_output_the_tightest_cap_has_room_for_and_reserves_exactly_that() {
    // Minute: 20,000 tokens; dollars: 30,000 µ$ = 900 in × 1 + at most 2,910 out × 10.
    let s = setup(config(|c| {
        c.output_allowance = 16_000;
        c.user_tokens_per_minute = cap(Some(20_000));
        c.user_usd_30d = cap(Some(30_000));
    }));
    let ana = conv("ana", "c1");
    let permit = ask(&s.guard, &ana, &asking(900, 16_000)).await.unwrap();
    assert_eq!(
        permit.max_output_tokens(),
        Some(2_910),
        "the dollar cap is the tightest"
    );
    let now = s.now.load(Ordering::SeqCst);
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        3_810
    );
    assert_eq!(used(&s.ledger, Bucket::UserUsd30d, &ana, now).await, 30_000);
    // The worst case settles to exactly the reservation: nothing past the cap.
    let worst = Usage {
        input_tokens: 900,
        output_tokens: 2_910,
        ..Usage::default()
    };
    s.guard.after_model_call(&ana, permit, &worst).await;
    assert_eq!(used(&s.ledger, Bucket::UserUsd30d, &ana, now).await, 30_000);
    tripped(
        ask(&s.guard, &ana, &asking(10, 16_000)).await,
        Bucket::UserUsd30d,
    );
}

#[tokio::test]
async fn the_allowance_is_never_more_than_the_request_or_the_configured_ceiling() {
    let s = setup(config(|c| {
        c.output_allowance = 4_000;
        c.user_tokens_per_minute = cap(Some(100_000));
    }));
    let ana = conv("ana", "c1");
    let permit = ask(&s.guard, &ana, &asking(900, 16_000)).await.unwrap();
    assert_eq!(permit.max_output_tokens(), Some(4_000), "the ceiling");
    let permit = ask(&s.guard, &ana, &asking(900, 300)).await.unwrap();
    assert_eq!(
        permit.max_output_tokens(),
        Some(300),
        "the request's own max_tokens"
    );
    let now = s.now.load(Ordering::SeqCst);
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        4_900 + 1_200
    );
}

#[tokio::test]
async fn a_call_with_room_for_less_than_the_floor_is_denied_and_reserves_nothing() {
    // 3,000 tokens a minute; the floor is 1,000 output tokens.
    let s = setup(config(|c| {
        c.output_allowance = 16_000;
        c.min_output_tokens = 1_000;
        c.user_tokens_per_minute = cap(Some(3_000));
    }));
    let ana = conv("ana", "c1");
    let now = s.now.load(Ordering::SeqCst);
    // 2,001 input leaves room for 999 output: one short of the floor.
    tripped(
        ask(&s.guard, &ana, &asking(2_001, 16_000)).await,
        Bucket::UserTokensMinute,
    );
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        0
    );
    // Input alone past the cap.
    tripped(
        ask(&s.guard, &ana, &asking(3_001, 16_000)).await,
        Bucket::UserTokensMinute,
    );
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        0
    );
    // 2,000 input leaves exactly the floor: sent with it.
    let permit = ask(&s.guard, &ana, &asking(2_000, 16_000)).await.unwrap();
    assert_eq!(permit.max_output_tokens(), Some(1_000));
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        3_000
    );
    // A request that wants less than the floor is judged against what it wants.
    let s = setup(config(|c| {
        c.output_allowance = 16_000;
        c.min_output_tokens = 1_000;
        c.user_tokens_per_minute = cap(Some(3_000));
    }));
    let permit = ask(&s.guard, &ana, &asking(2_500, 200)).await.unwrap();
    assert_eq!(permit.max_output_tokens(), Some(200));
}

#[tokio::test]
async fn the_hour_bucket_trips_alone_and_a_new_minute_does_not_help() {
    let s = setup(config(|c| {
        c.user_tokens_per_minute = cap(Some(10_000));
        c.user_tokens_per_hour = cap(Some(3_000));
    }));
    let ana = conv("ana", "c1");
    for _ in 0..3 {
        call(&s.guard, &ana, 900).await.unwrap();
        s.now.fetch_add(60_000, Ordering::SeqCst);
    }
    tripped(call(&s.guard, &ana, 900).await, Bucket::UserTokensHour);
    s.now.fetch_add(3_600_000, Ordering::SeqCst);
    call(&s.guard, &ana, 900).await.expect("the next hour");
}

#[tokio::test]
async fn the_user_dollar_bucket_trips_alone() {
    // Each call: 900 in × $1/M + 100 out × $10/M = 900 + 1,000 µ$ = 1,900 µ$.
    let s = setup(config(|c| c.user_usd_30d = cap(Some(4_000))));
    let ana = conv("ana", "c1");
    call(&s.guard, &ana, 900).await.unwrap();
    call(&s.guard, &ana, 900).await.unwrap();
    tripped(call(&s.guard, &ana, 900).await, Bucket::UserUsd30d);
    assert_eq!(
        used(
            &s.ledger,
            Bucket::UserUsd30d,
            &ana,
            s.now.load(Ordering::SeqCst)
        )
        .await,
        3_800
    );
    call(&s.guard, &conv("bo", "c2"), 900)
        .await
        .expect("bo has his own allowance");
}

#[tokio::test]
async fn the_global_ceiling_trips_for_everyone() {
    let s = setup(config(|c| {
        c.user_usd_30d = cap(Some(1_000_000));
        c.global_usd_30d = cap(Some(4_000));
    }));
    let ana = conv("ana", "c1");
    call(&s.guard, &ana, 900).await.unwrap();
    call(&s.guard, &ana, 900).await.unwrap();
    tripped(call(&s.guard, &ana, 900).await, Bucket::GlobalUsd30d);
    tripped(
        call(&s.guard, &conv("bo", "c2"), 900).await,
        Bucket::GlobalUsd30d,
    );
    tripped(
        call(&s.guard, &conv("cy", "c3"), 10).await,
        Bucket::GlobalUsd30d,
    );
    // Nothing of the refused calls was added anywhere.
    let now = s.now.load(Ordering::SeqCst);
    assert_eq!(
        used(&s.ledger, Bucket::GlobalUsd30d, &ana, now).await,
        3_800
    );
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &conv("bo", "c2"), now).await,
        0
    );
}

#[tokio::test]
async fn settling_replaces_the_reservation_with_real_usage_cache_tokens_included() {
    let s = setup(config(|c| c.user_tokens_per_minute = cap(Some(100_000))));
    let ana = conv("ana", "c1");
    let permit = call(&s.guard, &ana, 900).await.unwrap();
    let now = s.now.load(Ordering::SeqCst);
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        1_000
    );
    assert_eq!(used(&s.ledger, Bucket::UserUsd30d, &ana, now).await, 1_900);
    let real = Usage {
        input_tokens: 200,
        output_tokens: 350,
        cache_read_tokens: 8_000,
        cache_write_tokens: 1_000,
    };
    s.guard.after_model_call(&ana, permit, &real).await;
    // Tokens: all four kinds. Dollars: 200×1 + 350×10 + 8,000×0.1 + 1,000×2 = 6,500 µ$.
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        9_550
    );
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensHour, &ana, now).await,
        9_550
    );
    for b in [
        Bucket::UserUsd30d,
        Bucket::GlobalUsd30d,
        Bucket::ConversationUsd30d,
    ] {
        assert_eq!(used(&s.ledger, b, &ana, now).await, 6_500, "{}", b.name());
    }
    // A second call settled below its reservation gives the rest back.
    let permit = call(&s.guard, &ana, 900).await.unwrap();
    s.guard
        .after_model_call(
            &ana,
            permit,
            &Usage {
                input_tokens: 10,
                output_tokens: 1,
                ..Usage::default()
            },
        )
        .await;
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        9_561
    );
    assert_eq!(
        used(&s.ledger, Bucket::UserUsd30d, &ana, now).await,
        6_500 + 20
    );
    // The settle goes to the window it was reserved in, even after the clock moved on.
    let permit = call(&s.guard, &ana, 900).await.unwrap();
    s.now.fetch_add(60_000, Ordering::SeqCst);
    s.guard
        .after_model_call(&ana, permit, &Usage::default())
        .await;
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        9_561
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_parallel_calls_of_one_user_never_pass_the_cap_by_more_than_one_reservation() {
    // 1,000 tokens per reservation; the cap fits five.
    let s = Arc::new(setup(config(|c| {
        c.user_tokens_per_minute = cap(Some(5_000))
    })));
    let reserved = Arc::new(tokio::sync::Barrier::new(16));
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (s, reserved) = (s.clone(), reserved.clone());
        tasks.push(tokio::spawn(async move {
            let c = conv("ana", &format!("c{i}"));
            let permit = call(&s.guard, &c, 900).await;
            // All calls are in flight together: every reservation happens before any settle.
            reserved.wait().await;
            if let Ok(permit) = permit {
                // Every call used a little more than reserved.
                let real = Usage {
                    input_tokens: 950,
                    output_tokens: 150,
                    ..Usage::default()
                };
                s.guard.after_model_call(&c, permit, &real).await;
                true
            } else {
                false
            }
        }));
    }
    let mut allowed = 0;
    for t in tasks {
        allowed += usize::from(t.await.unwrap());
    }
    assert_eq!(allowed, 5, "exactly the reservations that fit");
    let now = s.now.load(Ordering::SeqCst);
    let total = used(&s.ledger, Bucket::UserTokensMinute, &conv("ana", "c0"), now).await;
    assert_eq!(total, 5 * 1_100, "settled to real usage");
    assert!(
        total <= 5_000 + 1_000,
        "overshoot is at most one reservation"
    );
}

#[tokio::test]
async fn a_ledger_failure_denies_the_call() {
    // A ledger whose file was made read-only after opening cannot take a reservation.
    struct Broken;
    #[async_trait::async_trait]
    impl BudgetLedger for Broken {
        async fn reserve(&self, _: &[store::Charge]) -> Result<store::Reserve, store::StoreError> {
            Err(store::StoreError::Unavailable("disk gone".into()))
        }
        async fn adjust(&self, _: &[store::Adjustment]) -> Result<(), store::StoreError> {
            Err(store::StoreError::Unavailable("disk gone".into()))
        }
        async fn bucket_usage(
            &self,
            _: &[store::BucketKey],
        ) -> Result<Vec<u64>, store::StoreError> {
            Err(store::StoreError::Unavailable("disk gone".into()))
        }
        async fn buckets_of_window(
            &self,
            _: &str,
            _: i64,
        ) -> Result<Vec<store::BucketUsage>, store::StoreError> {
            Err(store::StoreError::Unavailable("disk gone".into()))
        }
    }
    let guard = BudgetGuard::new(
        Arc::new(Broken),
        Arc::new(config(|_| {})),
        budget::system_clock(),
    );
    let denied = call(&guard, &conv("ana", "c1"), 10).await.unwrap_err();
    assert_eq!(denied.user_message, lines::CANNOT_CHECK);
    assert!(!denied.user_message.contains("disk"));
}

#[tokio::test]
async fn a_ledger_that_cannot_be_read_after_a_trip_denies_the_call() {
    /// Reserves on SQLite, but cannot read a bucket back.
    struct Unreadable(SqliteStore);
    #[async_trait::async_trait]
    impl BudgetLedger for Unreadable {
        async fn reserve(
            &self,
            charges: &[store::Charge],
        ) -> Result<store::Reserve, store::StoreError> {
            self.0.reserve(charges).await
        }
        async fn adjust(&self, a: &[store::Adjustment]) -> Result<(), store::StoreError> {
            self.0.adjust(a).await
        }
        async fn bucket_usage(
            &self,
            _: &[store::BucketKey],
        ) -> Result<Vec<u64>, store::StoreError> {
            Err(store::StoreError::Unavailable("disk gone".into()))
        }
        async fn buckets_of_window(
            &self,
            w: &str,
            start: i64,
        ) -> Result<Vec<store::BucketUsage>, store::StoreError> {
            self.0.buckets_of_window(w, start).await
        }
    }
    let config = config(|c| {
        c.output_allowance = 16_000;
        c.user_tokens_per_minute = cap(Some(10_000));
    });
    let guard = BudgetGuard::new(
        Arc::new(Unreadable(SqliteStore::open_in_memory().unwrap())),
        Arc::new(config),
        Arc::new(|| T0),
    );
    // 16,900 does not fit, so the guard must read what is left: it cannot, and says so.
    let denied = ask(&guard, &conv("ana", "c1"), &asking(900, 16_000))
        .await
        .unwrap_err();
    assert_eq!(denied.user_message, lines::CANNOT_CHECK);
    assert_eq!(denied.reason, "budget:unavailable");
    assert_eq!(
        denied.kind,
        engine::DeniedKind::Unchecked,
        "not a limit: nothing says the window is full"
    );
}

#[tokio::test]
async fn the_conversation_rate_counts_first_calls_only() {
    let s = setup(config(|c| c.conversation_messages_per_hour = cap(Some(2))));
    let clock_now = s.now.clone();
    let rate = ConversationRate::new(
        s.ledger.clone(),
        s.config.clone(),
        Arc::new(move || clock_now.load(Ordering::SeqCst)),
    );
    let c1 = conv("ana", "c1");
    let req = request(10);
    let at = |n| GuardCall {
        conversation: &c1,
        call_number: n,
        request: &req,
        account: None,
    };
    rate.before_model_call(&at(1)).await.unwrap();
    // Tool round trips of the same turn are not messages.
    for n in 2..10 {
        rate.before_model_call(&at(n)).await.unwrap();
    }
    rate.before_model_call(&at(1)).await.unwrap();
    let denied = rate.before_model_call(&at(1)).await.unwrap_err();
    assert_eq!(denied.user_message, lines::CONVERSATION_BUSY);
    // Another conversation of the same user is not busy.
    let c2 = conv("ana", "c2");
    rate.before_model_call(&GuardCall {
        conversation: &c2,
        call_number: 1,
        request: &req,
        account: None,
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_later_denial_in_a_chain_gives_the_earlier_reservation_back() {
    let s = setup(config(|c| c.user_tokens_per_minute = cap(Some(100_000))));
    let chain = Guards(vec![
        Arc::new(s.guard) as Arc<dyn Guard>,
        Arc::new(budget::NoModel("not plugged in".into())),
    ]);
    let ana = conv("ana", "c1");
    let denied = call(&chain, &ana, 900).await.unwrap_err();
    assert_eq!(denied.user_message, "not plugged in");
    let now = s.now.load(Ordering::SeqCst);
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        0
    );
}

#[tokio::test]
async fn the_meter_shows_each_buckets_fill() {
    let s = setup(config(|c| {
        c.user_tokens_per_minute = cap(Some(1_250));
        c.user_tokens_per_hour = cap(Some(10_000));
        c.user_usd_30d = cap(Some(19_000));
        c.global_usd_30d = cap(None);
    }));
    let ana = conv("ana", "c1");
    call(&s.guard, &ana, 900).await.unwrap();
    let meter = Meter::new(s.ledger.clone(), s.config.clone());
    let now = s.now.load(Ordering::SeqCst);
    let fill = meter.fill(&ana.user_id, now).await.unwrap();
    let by = |b: Bucket| fill.iter().find(|f| f.bucket == b).unwrap().clone();
    assert_eq!(by(Bucket::UserTokensMinute).fraction, 0.8);
    assert_eq!(by(Bucket::UserTokensHour).fraction, 0.1);
    assert_eq!(by(Bucket::UserUsd30d).fraction, 0.1);
    assert_eq!(by(Bucket::GlobalUsd30d).cap, None);
    assert_eq!(
        by(Bucket::UserTokensMinute).resets_at_ms,
        Bucket::UserTokensMinute.start(now) + 60_000
    );
    let bo = meter.fill(&"bo".into(), now).await.unwrap();
    assert!(
        bo.iter()
            .all(|f| f.used == 0 || f.bucket == Bucket::GlobalUsd30d)
    );
}

/// A call the provider reported no usage for, or that failed, still costs what it used: never
/// zero once anything came back, and nothing when it failed before anything did.
#[tokio::test]
async fn unreported_and_failed_calls_are_settled_from_an_estimate() {
    let s = setup(config(|c| c.user_tokens_per_minute = cap(Some(100_000))));
    let ana = conv("ana", "c1");
    let now = s.now.load(Ordering::SeqCst);

    // Refused before anything streamed back (a refused connection, throttled): released in
    // full.
    let permit = call(&s.guard, &ana, 900).await.unwrap();
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        1_000,
        "900 input + 100 allowance reserved"
    );
    let report = engine::CallReport {
        failed: true,
        ..engine::CallReport::default()
    };
    s.guard.settle(&ana, permit, &report).await;
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        0
    );

    // Failed half-way, after "OK" streamed: the input was read, and the whole allowance may
    // have come out (a tool call's input is held back until complete, so what showed says
    // nothing of what was produced).
    let permit = call(&s.guard, &ana, 900).await.unwrap();
    let report = engine::CallReport {
        failed: true,
        streamed: true,
        streamed_bytes: 2,
        ..engine::CallReport::default()
    };
    s.guard.settle(&ana, permit, &report).await;
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        900 + 100
    );

    // Finished, but the provider sent no usage (an OpenAI-compatible server without the usage
    // chunk): settled as the request's estimate plus the streamed output, not as free.
    let permit = call(&s.guard, &ana, 300).await.unwrap();
    let report = engine::CallReport {
        streamed: true,
        streamed_bytes: 80,
        ..engine::CallReport::default()
    };
    s.guard.settle(&ana, permit, &report).await;
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        1_000 + 300 + 20
    );

    // Reported usage is taken as it is.
    let permit = call(&s.guard, &ana, 300).await.unwrap();
    let report = engine::CallReport {
        usage: Usage {
            input_tokens: 5,
            output_tokens: 7,
            ..Usage::default()
        },
        streamed: true,
        streamed_bytes: 10_000,
        ..engine::CallReport::default()
    };
    s.guard.settle(&ana, permit, &report).await;
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        1_320 + 12
    );

    // An estimate never charges more output than the call was allowed (100 here), however many
    // characters streamed: the provider could not have produced more.
    let permit = call(&s.guard, &ana, 300).await.unwrap();
    let report = engine::CallReport {
        failed: true,
        streamed: true,
        streamed_bytes: 2_000,
        ..engine::CallReport::default()
    };
    s.guard.settle(&ana, permit, &report).await;
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        1_332 + 300 + 100
    );

    // Failed after it started but with nothing shown (a long tool call's input, held back
    // until complete, cut by the deadline): the input was read and any of the allowance may
    // have come out, so the whole reservation stands — not settled as free.
    let permit = call(&s.guard, &ana, 900).await.unwrap();
    let report = engine::CallReport {
        failed: true,
        streamed: true,
        streamed_bytes: 0,
        ..engine::CallReport::default()
    };
    s.guard.settle(&ana, permit, &report).await;
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        1_732 + 900 + 100
    );

    // Timed out before anything came back (a slow first token, a long input): it was sent and
    // not refused, so its input is counted; no output came, so none is.
    let permit = call(&s.guard, &ana, 900).await.unwrap();
    let report = engine::CallReport {
        failed: true,
        timed_out: true,
        ..engine::CallReport::default()
    };
    s.guard.settle(&ana, permit, &report).await;
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        2_732 + 900
    );
}

/// The standard chain's rate: in the budget's first reservation of a turn (one write), all or
/// nothing with it.
#[tokio::test]
async fn the_conversation_rate_rides_in_the_first_reservation_all_or_nothing() {
    let s = setup(config(|c| {
        c.conversation_messages_per_hour = cap(Some(2));
        c.user_tokens_per_minute = cap(Some(2_500));
    }));
    let clock_now = s.now.clone();
    let guard = BudgetGuard::new(
        s.ledger.clone(),
        s.config.clone(),
        Arc::new(move || clock_now.load(Ordering::SeqCst)),
    )
    .with_conversation_rate();
    let ana = conv("ana", "c1");
    let req = request(900);
    let at = |n| GuardCall {
        conversation: &ana,
        call_number: n,
        request: &req,
        account: None,
    };
    let messages = |now| used(&s.ledger, Bucket::ConversationMessagesHour, &ana, now);
    let tokens = |now| used(&s.ledger, Bucket::UserTokensMinute, &ana, now);
    // A message, then a tool round of the same turn (not a message): 2,000 tokens.
    guard.before_model_call(&at(1)).await.unwrap();
    guard.before_model_call(&at(2)).await.unwrap();
    let now = s.now.load(Ordering::SeqCst);
    assert_eq!((messages(now).await, tokens(now).await), (1, 2_000));
    // A message the budget refuses is not counted against the rate either.
    tripped(
        guard.before_model_call(&at(1)).await,
        Bucket::UserTokensMinute,
    );
    assert_eq!(messages(now).await, 1);
    // Next minute: the second message fits; the third is over the rate and reserves nothing.
    s.now.fetch_add(60_000, Ordering::SeqCst);
    let now = s.now.load(Ordering::SeqCst);
    guard.before_model_call(&at(1)).await.unwrap();
    let denied = guard.before_model_call(&at(1)).await.unwrap_err();
    assert_eq!(
        denied.reason,
        format!("rate:{}", Bucket::ConversationMessagesHour.name())
    );
    assert_eq!(denied.user_message, lines::CONVERSATION_BUSY);
    assert_eq!((messages(now).await, tokens(now).await), (2, 1_000));
}

async fn outright(guard: &dyn Guard, conv: &Conversation, input: u64) -> Option<Denied> {
    let req = request(input);
    guard
        .refuses_outright(&GuardCall {
            conversation: conv,
            call_number: 1,
            request: &req,
            account: None,
        })
        .await
}

/// Before a turn fetches its attachments, the guard says whether its first call would be
/// refused even with nothing of the conversation in it: only when a window has no room for
/// that bare call (or the rate is full), with the sentence the call would get, writing
/// nothing. A window with room for a bare call is no refusal here, though a call with the
/// whole conversation may still be refused.
#[tokio::test]
async fn a_turn_is_refused_outright_only_when_even_a_bare_call_has_no_room() {
    let s = setup(config(|c| c.user_tokens_per_minute = cap(Some(2_500))));
    let ana = conv("ana", "c1");
    call(&s.guard, &ana, 900).await.unwrap();
    call(&s.guard, &ana, 900).await.unwrap();
    assert_eq!(outright(&s.guard, &ana, 10).await, None, "500 left");
    tripped(call(&s.guard, &ana, 900).await, Bucket::UserTokensMinute);
    call(&s.guard, &ana, 300).await.unwrap();
    let now = s.now.load(Ordering::SeqCst);
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        2_400
    );
    // 100 left: a bare call of 10 input tokens has room for 90 output, under its least (100).
    let denied = outright(&s.guard, &ana, 10)
        .await
        .expect("no room for a bare call");
    tripped(Err(denied), Bucket::UserTokensMinute);
    assert_eq!(
        used(&s.ledger, Bucket::UserTokensMinute, &ana, now).await,
        2_400,
        "nothing written"
    );
    assert_eq!(
        outright(&s.guard, &conv("bo", "c2"), 10).await,
        None,
        "bo's own minute"
    );

    // The rate, counted with the budget: full after one message, refused with its sentence,
    // and the refusal is not counted.
    let clock_now = s.now.clone();
    let rated = BudgetGuard::new(
        s.ledger.clone(),
        Arc::new(config(|c| c.conversation_messages_per_hour = cap(Some(1)))),
        Arc::new(move || clock_now.load(Ordering::SeqCst)),
    )
    .with_conversation_rate();
    let cy = conv("cy", "c3");
    assert_eq!(outright(&rated, &cy, 10).await, None);
    call(&rated, &cy, 10).await.unwrap();
    let busy = outright(&rated, &cy, 10).await.expect("the rate is full");
    assert_eq!(busy.kind, engine::DeniedKind::Limit);
    assert_eq!(busy.user_message, lines::CONVERSATION_BUSY);
    assert_eq!(
        used(&s.ledger, Bucket::ConversationMessagesHour, &cy, now).await,
        1
    );
}
