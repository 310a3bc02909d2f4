//! Hostile senders on the job path, on SQLite and on DynamoDB (moto): a sender may try five
//! link codes an hour that do not work; after that no code is looked up (the real one does not
//! link either) and "too many codes" is said once; the hour after, the real code links. A
//! stranger who writes fifty times is answered once. And a code someone else sends a linked
//! person (one tap on a deep link) does not move their chat to the sender's account.

use backend::ScriptedModel;
use channel_jobs::identity::Resolved;
use channel_jobs::{ChannelJobs, JobOptions, JobOutcome, lines};
use channels::Sender;
use engine::{Engine, EngineOptions};
use queue::TurnJob;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use store::Store;
use store_sqlite::SqliteStore;
use tests::KeepingPlatform;
use tests::moto::dynamo_store;
use tools::Registry;

/// 2026-12-01 10:00 UTC: the start of a clock hour.
const START_MS: i64 = 1_796_119_200_000;
const HOUR_MS: i64 = 3_600_000;
const SIGNUP: &str = "https://bridle.example/";

struct Setup {
    jobs: ChannelJobs,
    store: Arc<dyn Store>,
    platform: Arc<KeepingPlatform>,
    now: Arc<AtomicI64>,
}

fn setup(store: Arc<dyn Store>) -> Setup {
    let engine = Engine::new(
        Arc::new(ScriptedModel::new(vec![])),
        Arc::new(Registry::default()),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    );
    let platform = Arc::new(KeepingPlatform::default());
    let mut senders: HashMap<String, Arc<dyn Sender>> = HashMap::new();
    senders.insert("whatsapp".into(), platform.clone());
    let now = Arc::new(AtomicI64::new(START_MS + 60_000));
    let clock = now.clone();
    Setup {
        jobs: ChannelJobs {
            engine: Arc::new(engine),
            store: store.clone(),
            senders,
            options: JobOptions {
                metrics: metrics::Metrics::off(),
                signup_url: SIGNUP.into(),
                clock: Arc::new(move || clock.load(Ordering::SeqCst)),
                ..JobOptions::default()
            },
        },
        store,
        platform,
        now,
    }
}

fn job(id: &str, sender: &str, text: &str) -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "whatsapp".into(),
        message_id: id.into(),
        conversation_key: sender.into(),
        external_user_id: sender.into(),
        text: text.into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: 0,
    }
}

/// The `n`th of many distinct code-shaped guesses.
fn guess(n: usize) -> String {
    let a = channels::link_code::ALPHABET;
    let mut rest = n;
    let tail: String = (0..6)
        .map(|_| {
            let c = a[rest % a.len()] as char;
            rest /= a.len();
            c
        })
        .collect();
    format!("G7{tail}")
}

const MINUTE: Duration = Duration::from_secs(60);
const REAL_CODE: &str = "K7PQ2345";

async fn five_failed_tries_then_no_code_is_looked_up(store: Arc<dyn Store>) {
    let s = setup(store);
    // The code lives for two hours (longer than the default, so the next hour can use it).
    s.store
        .create_link_code(REAL_CODE, &"alice".into(), START_MS, START_MS + 2 * HOUR_MS)
        .await
        .unwrap();
    let guesses = [
        "AB23CD45 EF67GH23",
        "JK23MN45 NP67QR23",
        "ST23UV45 WX67YZ23",
    ];
    let mut outcomes = Vec::new();
    for (n, text) in guesses.iter().enumerate() {
        outcomes.push(
            s.jobs
                .run(&job(&format!("g-{n}"), "mallory", text), MINUTE)
                .await,
        );
    }
    // Tries 1-4 did not work; the third message's second code is the sixth try: refused.
    assert!(
        matches!(
            outcomes[0],
            JobOutcome::Answered(Resolved::StaleCode { bound: None })
        ),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[1], JobOutcome::Skipped(_)),
        "{outcomes:?}"
    );
    assert!(
        matches!(
            outcomes[2],
            JobOutcome::Answered(Resolved::TooManyCodes { bound: None })
        ),
        "{outcomes:?}"
    );
    // The real code is not even looked up now: it does not link.
    let outcome = s
        .jobs
        .run(&job("g-real", "mallory", "K7PQ-2345"), MINUTE)
        .await;
    assert!(matches!(outcome, JobOutcome::Skipped(_)), "{outcome:?}");
    assert_eq!(s.store.identity("whatsapp", "mallory").await.unwrap(), None);
    for n in 0..20 {
        let text = format!("{} {}", guess(2 * n), guess(2 * n + 1));
        let outcome = s
            .jobs
            .run(&job(&format!("more-{n}"), "mallory", &text), MINUTE)
            .await;
        assert!(matches!(outcome, JobOutcome::Skipped(_)), "{outcome:?}");
    }
    // One "that code didn't work", one "too many codes": never a reply per message.
    assert_eq!(
        s.platform.sent(),
        vec![lines::stale_code(SIGNUP), lines::too_many_codes(SIGNUP)]
    );
    // Another sender's tries are their own.
    let outcome = s.jobs.run(&job("b-1", "bob", "AB23CD45"), MINUTE).await;
    assert!(
        matches!(
            outcome,
            JobOutcome::Answered(Resolved::StaleCode { bound: None })
        ),
        "{outcome:?}"
    );
    // The next hour the sender may try again, and the real code (never looked up) links.
    s.now.fetch_add(HOUR_MS, Ordering::SeqCst);
    let outcome = s
        .jobs
        .run(&job("g-next-hour", "mallory", "K7PQ-2345"), MINUTE)
        .await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("alice".into()))
    );
    assert_eq!(
        s.store.identity("whatsapp", "mallory").await.unwrap(),
        Some("alice".into())
    );
}

async fn a_code_that_links_is_not_counted(store: Arc<dyn Store>) {
    let s = setup(store);
    for (n, user) in ["ana", "ben", "cleo", "dan", "eve", "fay"]
        .iter()
        .enumerate()
    {
        let code = format!("HJ{d}K{d}M{d}N", d = n + 2);
        s.store
            .create_link_code(&code, &(*user).into(), START_MS, START_MS + HOUR_MS)
            .await
            .unwrap();
        // Six live codes, one after another, from one sender: none is refused. The first
        // links; the others are other accounts', so each asks before moving the chat (said
        // once an hour).
        let outcome = s
            .jobs
            .run(&job(&format!("l-{n}"), "sam", &code), MINUTE)
            .await;
        match n {
            0 => assert_eq!(
                outcome,
                JobOutcome::Answered(Resolved::Linked((*user).into()))
            ),
            1 => assert_eq!(
                outcome,
                JobOutcome::Answered(Resolved::MoveAsked {
                    bound: "ana".into(),
                    to: (*user).into()
                })
            ),
            _ => assert!(matches!(outcome, JobOutcome::Skipped(_)), "{outcome:?}"),
        }
    }
    // None of them spent a try: a made-up code is still looked up (and does not work).
    let outcome = s.jobs.run(&job("l-guess", "sam", "AB23CD45"), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::StaleCode {
            bound: Some("ana".into())
        })
    );
}

async fn a_stranger_writing_fifty_times_is_answered_once(store: Arc<dyn Store>) {
    let s = setup(store);
    for n in 0..50 {
        s.jobs
            .run(&job(&format!("h-{n}"), "stranger", "hello?"), MINUTE)
            .await;
    }
    assert_eq!(s.platform.sent(), vec![lines::onboarding(SIGNUP)]);
}

async fn a_code_sent_again_is_answered_once_an_hour(store: Arc<dyn Store>) {
    let s = setup(store);
    s.store
        .create_link_code("K7PQ2345", &"alice".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    let outcome = s.jobs.run(&job("l-0", "sam", "K7PQ2345"), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("alice".into()))
    );
    // The same live code again and again: still linked, and said so once more this hour.
    for n in 1..=20 {
        s.jobs
            .run(&job(&format!("l-{n}"), "sam", "K7PQ2345"), MINUTE)
            .await;
    }
    assert_eq!(
        s.platform.sent(),
        vec![lines::linked(SAM), lines::linked(SAM)]
    );
    assert_eq!(
        s.store.identity("whatsapp", "sam").await.unwrap(),
        Some("alice".into())
    );
    // Its tries are not spent: a fresh code of another account still moves the chat, once
    // asked for with MOVE.
    s.store
        .create_link_code("HJ2K3M4N", &"ben".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    let outcome = s.jobs.run(&job("l-ben", "sam", "HJ2K3M4N"), MINUTE).await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::MoveAsked { .. })),
        "{outcome:?}"
    );
    let move_code = move_code_in(&s.platform.sent().last().cloned().unwrap());
    let outcome = s
        .jobs
        .run(
            &job("l-ben-move", "sam", &format!("move {move_code}")),
            MINUTE,
        )
        .await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("ben".into()))
    );
    // Another sender cannot use it (redeemed by sam).
    let outcome = s.jobs.run(&job("m-0", "mallory", "K7PQ2345"), MINUTE).await;
    assert!(
        matches!(
            outcome,
            JobOutcome::Answered(Resolved::StaleCode { bound: None })
        ),
        "{outcome:?}"
    );
}

/// What a reply calls an account these tests make none for: the one made on its first contact,
/// named after the chat.
const SAM: &str = "sam";

/// Mallory makes a link code and sends Sam, whose WhatsApp is linked to Alice's account, the
/// deep link (`wa.me/…?text=CODE` or `t.me/…?start=CODE`). Sam's tap sends the code: the chat
/// stays Alice's and Sam is told whose account the code is for, once an hour however often it
/// comes; only `MOVE <code>` moves it, and the reply says whose account it is then.
async fn a_code_from_someone_else_does_not_move_a_linked_chat(store: Arc<dyn Store>) {
    let s = setup(store);
    for (user, name, email) in [
        ("alice", "Alice Liddell", "alice@example.org"),
        ("mallory", "Mallory", "mallory@evil.example"),
    ] {
        s.store
            .create_account(&store::Account {
                email: Some(store::Email::parse(email).unwrap()),
                ..store::Account::new(user, name)
            })
            .await
            .unwrap();
    }
    let (alice, mallory) = (
        "Alice Liddell (a•••@example.org)",
        "Mallory (m•••@evil.example)",
    );
    s.store
        .create_link_code(REAL_CODE, &"alice".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    let outcome = s.jobs.run(&job("a-0", "sam", REAL_CODE), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("alice".into()))
    );

    s.store
        .create_link_code(
            "HJ2K3M4N",
            &"mallory".into(),
            START_MS,
            START_MS + 3 * HOUR_MS,
        )
        .await
        .unwrap();
    // The tap on Mallory's link: the chat stays Alice's, and Sam is told whose the code is,
    // with a move code made for this chat alone.
    let outcome = s
        .jobs
        .run(&job("m-0", "sam", "/start HJ2K3M4N"), MINUTE)
        .await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::MoveAsked {
            bound: "alice".into(),
            to: "mallory".into(),
        })
    );
    let asked = s.platform.sent().last().cloned().unwrap();
    let move_code = move_code_in(&asked);
    assert_ne!(
        channels::link_code::canonical(&move_code).unwrap(),
        "HJ2K3M4N"
    );
    assert_eq!(asked, lines::move_asked(alice, mallory, &move_code));
    // What Mallory can put in a link moves nothing: her code again, alone or after MOVE (a
    // WhatsApp or SMS link fills in any text), a fresh code of hers with MOVE, or her code
    // among other words. Sam is asked once this hour.
    s.store
        .create_link_code("JK3M4N5P", &"mallory".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    for (n, text) in [
        "/start HJ2K3M4N",
        "MOVE HJ2K-3M4N",
        "MOVE JK3M-4N5P",
        "what is HJ2K-3M4N?",
    ]
    .into_iter()
    .enumerate()
    {
        s.jobs
            .run(&job(&format!("m-{}", n + 1), "sam", text), MINUTE)
            .await;
        assert_eq!(
            s.store.identity("whatsapp", "sam").await.unwrap(),
            Some("alice".into()),
            "{text:?} moved the chat"
        );
    }
    assert_eq!(
        s.platform.sent(),
        vec![lines::linked(alice), asked.clone()],
        "asked once this hour"
    );
    // Another member of a group chat sees the move code and sends it first: it was made for
    // Sam alone, so it moves nothing and is not used up (Sam's MOVE below still moves).
    let vera_in_the_chat = TurnJob {
        external_user_id: "vera".into(),
        ..job("vera-chat", "sam", &format!("MOVE {move_code}"))
    };
    let outcome = s.jobs.run(&vera_in_the_chat, MINUTE).await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::StaleCode { .. })),
        "{outcome:?}"
    );
    assert_eq!(s.store.identity("whatsapp", "vera").await.unwrap(), None);
    // The move code alone (what a Telegram start link could carry, were it seen) moves nothing.
    let outcome = s
        .jobs
        .run(
            &job("m-bare", "sam", &format!("/start {move_code}")),
            MINUTE,
        )
        .await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::StaleCode { .. })),
        "{outcome:?}"
    );
    assert_eq!(
        s.store.identity("whatsapp", "sam").await.unwrap(),
        Some("alice".into())
    );
    // Sam's move code from another chat moves nothing.
    let outcome = s
        .jobs
        .run(&job("v-0", "victor", &format!("MOVE {move_code}")), MINUTE)
        .await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::StaleCode { .. })),
        "{outcome:?}"
    );
    assert_eq!(s.store.identity("whatsapp", "victor").await.unwrap(), None);

    // Sam sends MOVE and it: the chat moves, and the reply says to whose account.
    let outcome = s
        .jobs
        .run(&job("m-move", "sam", &format!("MOVE {move_code}")), MINUTE)
        .await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("mallory".into()))
    );
    assert_eq!(
        s.store.identity("whatsapp", "sam").await.unwrap(),
        Some("mallory".into())
    );
    assert_eq!(s.platform.sent().last(), Some(&lines::linked(mallory)));
}

/// A linked sender sends their own live move code again and again the wrong way (`/start
/// CODE`, as a link carries it, not `MOVE CODE`): each does nothing, and each counts as a failed
/// try, so they get at most five "that code did not work" replies and one "too many codes" an
/// hour, not a reply (an SMS, paid for) per message.
async fn a_live_code_sent_again_the_wrong_way_costs_tries(store: Arc<dyn Store>) {
    let s = setup(store);
    for (user, code) in [("alice", REAL_CODE), ("bo", "HJ2K3M4N")] {
        s.store
            .create_link_code(code, &user.into(), START_MS, START_MS + 3 * HOUR_MS)
            .await
            .unwrap();
    }
    let outcome = s.jobs.run(&job("a-0", "sam", REAL_CODE), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("alice".into()))
    );
    let outcome = s.jobs.run(&job("b-0", "sam", "HJ2K3M4N"), MINUTE).await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::MoveAsked { .. })),
        "{outcome:?}"
    );
    let move_code = move_code_in(&s.platform.sent().last().cloned().unwrap());
    let before = s.platform.sent().len();
    let mut outcomes = Vec::new();
    for n in 0..10 {
        let text = format!("/start {move_code}");
        outcomes.push(
            s.jobs
                .run(&job(&format!("w-{n}"), "sam", &text), MINUTE)
                .await,
        );
    }
    let stale = outcomes
        .iter()
        .filter(|o| matches!(o, JobOutcome::Answered(Resolved::StaleCode { .. })))
        .count();
    assert_eq!(stale, 5, "{outcomes:?}");
    assert!(
        matches!(
            outcomes[5],
            JobOutcome::Answered(Resolved::TooManyCodes { .. })
        ),
        "{outcomes:?}"
    );
    assert_eq!(
        s.platform.sent().len() - before,
        6,
        "five stale replies and one too-many, then silence"
    );
    assert_eq!(
        s.store.identity("whatsapp", "sam").await.unwrap(),
        Some("alice".into())
    );
}

#[tokio::test]
async fn sqlite_a_live_code_sent_again_the_wrong_way_costs_tries() {
    a_live_code_sent_again_the_wrong_way_costs_tries(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_live_code_sent_again_the_wrong_way_costs_tries() {
    a_live_code_sent_again_the_wrong_way_costs_tries(dynamo_store("codes-wrong-way").await).await;
}

/// An SMS whose `From` is forged (Twilio signs only that it passed the text on) cannot link
/// that number: Mallory's code from Vic's number links nothing, and the code that would is
/// texted to Vic's phone, which Mallory never sees; nothing she can send links it (her code
/// again, with `LINK`, a guess). Vic's own code, the same hour, asks the same (her forged text
/// does not use up his asking), and the code Vic was texted links the number to Vic. A texted
/// code from another number links nothing.
async fn a_forged_text_cannot_link_someone_elses_number(store: Arc<dyn Store>) {
    let mut s = setup(store);
    s.jobs
        .senders
        .insert("twilio".into(), s.platform.clone() as Arc<dyn Sender>);
    for (user, name, email) in [
        ("vic", "Vic Tim", "vic@example.org"),
        ("mallory", "Mallory", "mallory@evil.example"),
    ] {
        s.store
            .create_account(&store::Account {
                email: Some(store::Email::parse(email).unwrap()),
                ..store::Account::new(user, name)
            })
            .await
            .unwrap();
    }
    const VIC: &str = "+15550100";
    let sms = |id: &str, from: &str, text: &str| TurnJob {
        channel: "twilio".into(),
        conversation_key: format!("{from}:+15550199"),
        external_user_id: from.into(),
        ..job(id, from, text)
    };
    s.store
        .create_link_code("HJ2K3M4N", &"mallory".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    let outcome = s.jobs.run(&sms("f-0", VIC, "HJ2K-3M4N"), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::LinkAsked {
            to: "mallory".into()
        })
    );
    assert_eq!(s.store.identity("twilio", VIC).await.unwrap(), None);
    let texted = s.platform.sent().last().cloned().unwrap();
    assert!(texted.starts_with("To link this number"), "{texted}");
    let link_code = code_after(&texted, "LINK ");
    assert_ne!(
        channels::link_code::canonical(&link_code).unwrap(),
        "HJ2K3M4N"
    );
    // What Mallory can forge from Vic's number links nothing, and Vic is texted once an hour.
    s.store
        .create_link_code("JK3M4N5P", &"mallory".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    for (n, text) in [
        "HJ2K-3M4N",
        "LINK HJ2K-3M4N",
        "LINK JK3M-4N5P",
        "LINK 23456789",
    ]
    .into_iter()
    .enumerate()
    {
        s.jobs
            .run(&sms(&format!("f-{}", n + 1), VIC, text), MINUTE)
            .await;
        assert_eq!(
            s.store.identity("twilio", VIC).await.unwrap(),
            None,
            "{text:?} linked the number"
        );
    }
    let asked: Vec<String> = s
        .platform
        .sent()
        .into_iter()
        .filter(|t| t.starts_with("To link this number"))
        .collect();
    assert_eq!(asked, vec![texted.clone()], "texted once this hour");
    // The code texted to Vic works only from Vic's number, and only after LINK.
    let from_mallory = s
        .jobs
        .run(
            &sms("m-0", "+15550666", &format!("LINK {link_code}")),
            MINUTE,
        )
        .await;
    assert!(
        matches!(
            from_mallory,
            JobOutcome::Answered(Resolved::StaleCode { .. })
        ),
        "{from_mallory:?}"
    );
    assert_eq!(s.store.identity("twilio", VIC).await.unwrap(), None);

    // Vic's own code, the same hour: Mallory's forged text did not use up Vic's asking.
    let later = START_MS + 60_000;
    s.store
        .create_link_code("M3RT6789", &"vic".into(), later, later + HOUR_MS)
        .await
        .unwrap();
    let outcome = s.jobs.run(&sms("v-0", VIC, "M3RT-6789"), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::LinkAsked { to: "vic".into() })
    );
    let texted = s.platform.sent().last().cloned().unwrap();
    assert!(texted.contains("Vic Tim (v•••@example.org)"), "{texted}");
    let vics = code_after(&texted, "LINK ");
    let outcome = s
        .jobs
        .run(&sms("v-1", VIC, &format!("Link: {vics}")), MINUTE)
        .await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("vic".into()))
    );
    assert_eq!(
        s.store.identity("twilio", VIC).await.unwrap(),
        Some("vic".into())
    );
}

#[tokio::test]
async fn sqlite_a_forged_text_cannot_link_someone_elses_number() {
    a_forged_text_cannot_link_someone_elses_number(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_forged_text_cannot_link_someone_elses_number() {
    a_forged_text_cannot_link_someone_elses_number(dynamo_store("codes-sms-forged").await).await;
}

/// The move code a "move asked" reply gives (after `MOVE `).
fn move_code_in(reply: &str) -> String {
    code_after(reply, "MOVE ")
}

/// The code a reply gives after `word` (`MOVE `, `LINK `).
fn code_after(reply: &str, word: &str) -> String {
    let (_, after) = reply
        .split_once(word)
        .unwrap_or_else(|| panic!("the reply gives a code after {word:?}: {reply}"));
    after.split_whitespace().next().unwrap().to_owned()
}

fn sqlite() -> Arc<dyn Store> {
    Arc::new(SqliteStore::open_in_memory().unwrap())
}

/// An unlinked chat is not linked again by the code that linked it, sent again while the code
/// is live (it is in the chat's history): the unlink stands. The linking job run again (it
/// came before the code was first redeemed) still links, and a new code links.
async fn an_unlinked_chat_is_not_linked_again_by_its_old_code(store: Arc<dyn Store>) {
    let s = setup(store);
    s.store
        .create_link_code("HJ2K3M4N", &"ana".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    // Received 30 s before the worker (its clock at START + 1 minute) redeems the code.
    let linking = TurnJob {
        received_at_ms: START_MS + 30_000,
        ..job("u-1", "sam", "HJ2K3M4N")
    };
    let outcome = s.jobs.run(&linking, MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("ana".into()))
    );
    assert_eq!(
        s.store.unbind_identity("whatsapp", "sam").await.unwrap(),
        Some("ana".into())
    );
    // Five minutes later, the old code again: not linked.
    s.now.fetch_add(5 * 60_000, Ordering::SeqCst);
    let again = TurnJob {
        received_at_ms: START_MS + 6 * 60_000,
        ..job("u-2", "sam", "HJ2K3M4N")
    };
    let outcome = s.jobs.run(&again, MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::StaleCode { bound: None })
    );
    assert_eq!(s.store.identity("whatsapp", "sam").await.unwrap(), None);
    // A message that came before the code was first redeemed still links (as the linking
    // job does when run again after dying between redeeming and binding).
    let outcome = s
        .jobs
        .run(
            &TurnJob {
                message_id: "u-1-again".into(),
                ..linking.clone()
            },
            MINUTE,
        )
        .await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("ana".into()))
    );
    s.store.unbind_identity("whatsapp", "sam").await.unwrap();
    // A new code from the account links as ever, even when the webhook's clock runs five
    // minutes ahead of the worker's: this try redeems it first.
    s.store
        .create_link_code("JK3M4N5P", &"ana".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    let fresh = TurnJob {
        received_at_ms: s.now.load(Ordering::SeqCst) + 5 * 60_000,
        ..job("u-3", "sam", "JK3M4N5P")
    };
    let outcome = s.jobs.run(&fresh, MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("ana".into()))
    );
    // Bo's code asks to move the chat, with a move code; the chat is unlinked; the move code
    // then links nothing either: there is no linked chat left to move.
    s.store
        .create_link_code("KM4N5P6Q", &"bo".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    let outcome = s.jobs.run(&job("u-4", "sam", "KM4N5P6Q"), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::MoveAsked {
            bound: "ana".into(),
            to: "bo".into()
        })
    );
    let move_code = move_code_in(&s.platform.sent().last().cloned().unwrap());
    s.store.unbind_identity("whatsapp", "sam").await.unwrap();
    let outcome = s
        .jobs
        .run(&job("u-5", "sam", &format!("MOVE {move_code}")), MINUTE)
        .await;
    assert!(
        !matches!(outcome, JobOutcome::Answered(Resolved::Linked(_))),
        "{outcome:?}"
    );
    assert_eq!(s.store.identity("whatsapp", "sam").await.unwrap(), None);
}

/// Between a linking job's read of the chat's binding and its write, the binding changes:
/// the same sender's job in another chat (a DM and a group run at once) links it first, or an
/// operator unlinks it. The job decides again from what is there now: it asks before moving
/// a chat linked since, and a move code does not link a chat unlinked since.
#[tokio::test]
async fn a_binding_that_changed_while_linking_is_decided_again() {
    let flaky = Arc::new(tests::FlakyStore::new(Arc::new(
        SqliteStore::open_in_memory().unwrap(),
    )));
    let s = setup(flaky.clone());
    for (code, user) in [("HJ2K3M4N", "ana"), ("JK3M4N5P", "bo")] {
        s.store
            .create_link_code(code, &user.into(), START_MS, START_MS + HOUR_MS)
            .await
            .unwrap();
    }
    // Sam, linked to nobody, sends Bo's code; Sam's job in another chat links Ana's first.
    flaky.bound_elsewhere_first(Some("ana".into()));
    let outcome = s.jobs.run(&job("u-1", "sam", "JK3M4N5P"), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::MoveAsked {
            bound: "ana".into(),
            to: "bo".into()
        }),
        "a chat linked since is asked about, not moved"
    );
    assert_eq!(
        s.store.identity("whatsapp", "sam").await.unwrap(),
        Some("ana".into())
    );
    // Sam answers MOVE; an operator unlinks the chat (a lost phone) just before the bind.
    let move_code = move_code_in(&s.platform.sent().last().cloned().unwrap());
    flaky.bound_elsewhere_first(None);
    let outcome = s
        .jobs
        .run(&job("u-2", "sam", &format!("MOVE {move_code}")), MINUTE)
        .await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::StaleCode { bound: None }),
        "the unlink stands"
    );
    assert_eq!(s.store.identity("whatsapp", "sam").await.unwrap(), None);
    // Both chats send the same code at once: each finds the chat linked to the code's
    // account, and says so.
    s.store
        .create_link_code("KM4N5P6Q", &"bo".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    flaky.bound_elsewhere_first(Some("bo".into()));
    let outcome = s.jobs.run(&job("u-3", "sam", "KM4N5P6Q"), MINUTE).await;
    assert_eq!(outcome, JobOutcome::Answered(Resolved::Linked("bo".into())));
    assert_eq!(
        s.store.identity("whatsapp", "sam").await.unwrap(),
        Some("bo".into())
    );
}

/// A code decided again after its binding changed is not tried again: the sender's tries of
/// the hour are counted once for the message, whatever came between.
#[tokio::test]
async fn deciding_again_counts_no_try_twice() {
    let flaky = Arc::new(tests::FlakyStore::new(Arc::new(
        SqliteStore::open_in_memory().unwrap(),
    )));
    let s = setup(flaky.clone());
    s.store
        .create_link_code(REAL_CODE, &"bo".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    for n in 0..3 {
        let outcome = s
            .jobs
            .run(&job(&format!("g-{n}"), "sam", &guess(n)), MINUTE)
            .await;
        // Answered the first time; the same answer is given once an hour.
        assert!(
            matches!(
                outcome,
                JobOutcome::Answered(Resolved::StaleCode { bound: None }) | JobOutcome::Skipped(_)
            ),
            "{outcome:?}"
        );
    }
    // Three tries used; a wrong code and the right one: four, then the binding changes.
    flaky.bound_elsewhere_first(Some("ana".into()));
    let text = format!("{} {REAL_CODE}", guess(3));
    let outcome = s.jobs.run(&job("u-1", "sam", &text), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::MoveAsked {
            bound: "ana".into(),
            to: "bo".into()
        })
    );
    // The hour's fifth try is still there.
    let outcome = s.jobs.run(&job("g-5", "sam", &guess(5)), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::StaleCode {
            bound: Some("ana".into())
        })
    );
}

/// The store fails while a good code is being bound: the job fails and is tried again, and
/// that failure costs the sender no try (the code did not fail): with four of the hour's five
/// used, the retry still links.
#[tokio::test]
async fn a_store_failure_while_linking_costs_no_try() {
    let flaky = Arc::new(tests::FlakyStore::new(Arc::new(
        SqliteStore::open_in_memory().unwrap(),
    )));
    let s = setup(flaky.clone());
    s.store
        .create_link_code(REAL_CODE, &"bo".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    for n in 0..4 {
        s.jobs
            .run(&job(&format!("g-{n}"), "sam", &guess(n)), MINUTE)
            .await;
    }
    flaky.fail_binds(true);
    let linking = job("u-1", "sam", REAL_CODE);
    let outcome = s.jobs.run(&linking, MINUTE).await;
    assert!(matches!(outcome, JobOutcome::Failed(_)), "{outcome:?}");
    flaky.fail_binds(false);
    // The queue delivers the job again once its claim has lapsed.
    s.now.fetch_add(2 * 60_000, Ordering::SeqCst);
    let outcome = s.jobs.run(&linking, MINUTE).await;
    assert_eq!(outcome, JobOutcome::Answered(Resolved::Linked("bo".into())));
}

/// Someone sends a newcomer a link that carries their own code (a WhatsApp link fills in any
/// text): one tap links the newcomer's chat to their account. The reply names that account
/// and says how to undo it, and `UNLINK` from the sender unbinds it at once — no model call,
/// no operator; then the chat is a stranger's again, and the old code does not link it back.
async fn a_sender_unlinks_their_chat_alone(store: Arc<dyn Store>) {
    let s = setup(store);
    s.store
        .put_account(&store::Account {
            email: Some(store::Email::parse("mallory@example.org").unwrap()),
            ..store::Account::new("mallory", "Mallory")
        })
        .await
        .unwrap();
    s.store
        .create_link_code("HJ2K3M4N", &"mallory".into(), START_MS, START_MS + HOUR_MS)
        .await
        .unwrap();
    let outcome = s.jobs.run(&job("u-1", "sam", "HJ2K3M4N"), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Linked("mallory".into()))
    );
    let linked = s.platform.sent().last().cloned().unwrap();
    assert!(
        linked.contains("account of Mallory (m•••@example.org)") && linked.contains("Send UNLINK"),
        "{linked}"
    );

    // Sam did not mean it: "/unlink" (any case, as a Telegram command would come).
    let outcome = s.jobs.run(&job("u-2", "sam", " /Unlink "), MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Answered(Resolved::Unlinked("mallory".into()))
    );
    assert_eq!(s.store.identity("whatsapp", "sam").await.unwrap(), None);
    let reply = s.platform.sent().last().cloned().unwrap();
    assert_eq!(reply, lines::unlinked("Mallory (m•••@example.org)"));
    // A stranger again: UNLINK once more says there is nothing to unlink, and anything else
    // gets no more (a stranger is answered once an hour) and never a model call (the model
    // here has nothing to say); the old code, sent again from the chat's history, does not
    // link it back.
    let outcome = s.jobs.run(&job("u-3", "sam", "UNLINK"), MINUTE).await;
    assert_eq!(outcome, JobOutcome::Answered(Resolved::NotLinked));
    assert_eq!(
        s.platform.sent().last().cloned().unwrap(),
        lines::not_linked(SIGNUP)
    );
    let outcome = s
        .jobs
        .run(&job("u-4", "sam", "what's on my list?"), MINUTE)
        .await;
    assert!(matches!(outcome, JobOutcome::Skipped(_)), "{outcome:?}");
    // (Sent ten minutes on: a message that came before the code's first redemption is taken
    // for the linking job run again, which links.)
    s.now.fetch_add(10 * 60_000, Ordering::SeqCst);
    let again = TurnJob {
        received_at_ms: s.now.load(Ordering::SeqCst),
        ..job("u-5", "sam", "HJ2K3M4N")
    };
    let outcome = s.jobs.run(&again, MINUTE).await;
    assert!(
        !matches!(outcome, JobOutcome::Answered(Resolved::Linked(_))),
        "{outcome:?}"
    );
    assert_eq!(s.store.identity("whatsapp", "sam").await.unwrap(), None);
    // The word inside a sentence is a message like any other, for a linked sender; so is a
    // button labelled "Unlink" (a model can offer one) and a command for another bot.
    for text in [
        "please unlink me",
        "UNLINK HJ2K3M4N",
        "unlinked",
        "/unlink@OtherBot",
    ] {
        assert!(
            !channel_jobs::identity::is_unlink(&job("x", "sam", text)),
            "{text}"
        );
    }
    let pressed = TurnJob {
        button_id: Some("b1".into()),
        ..job("x", "sam", "Unlink")
    };
    assert!(!channel_jobs::identity::is_unlink(&pressed));
    assert!(channel_jobs::identity::is_unlink(&job(
        "x", "sam", "unlink\n"
    )));
}

#[tokio::test]
async fn sqlite_a_sender_unlinks_their_chat_alone() {
    a_sender_unlinks_their_chat_alone(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_sender_unlinks_their_chat_alone() {
    a_sender_unlinks_their_chat_alone(dynamo_store("codes-unlink").await).await;
}

#[tokio::test]
async fn sqlite_an_unlinked_chat_is_not_linked_again_by_its_old_code() {
    an_unlinked_chat_is_not_linked_again_by_its_old_code(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_an_unlinked_chat_is_not_linked_again_by_its_old_code() {
    an_unlinked_chat_is_not_linked_again_by_its_old_code(dynamo_store("codes-unlinked").await)
        .await;
}

#[tokio::test]
async fn sqlite_five_failed_tries_then_no_code_is_looked_up() {
    five_failed_tries_then_no_code_is_looked_up(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_five_failed_tries_then_no_code_is_looked_up() {
    five_failed_tries_then_no_code_is_looked_up(dynamo_store("codes").await).await;
}

#[tokio::test]
async fn sqlite_a_code_that_links_is_not_counted() {
    a_code_that_links_is_not_counted(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_code_that_links_is_not_counted() {
    a_code_that_links_is_not_counted(dynamo_store("codes").await).await;
}

#[tokio::test]
async fn sqlite_a_stranger_writing_fifty_times_is_answered_once() {
    a_stranger_writing_fifty_times_is_answered_once(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_stranger_writing_fifty_times_is_answered_once() {
    a_stranger_writing_fifty_times_is_answered_once(dynamo_store("strangers").await).await;
}

#[tokio::test]
async fn sqlite_a_code_sent_again_is_answered_once_an_hour() {
    a_code_sent_again_is_answered_once_an_hour(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_code_sent_again_is_answered_once_an_hour() {
    a_code_sent_again_is_answered_once_an_hour(dynamo_store("codes-again").await).await;
}

#[tokio::test]
async fn sqlite_a_code_from_someone_else_does_not_move_a_linked_chat() {
    a_code_from_someone_else_does_not_move_a_linked_chat(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_code_from_someone_else_does_not_move_a_linked_chat() {
    a_code_from_someone_else_does_not_move_a_linked_chat(dynamo_store("codes-move").await).await;
}
