//! Unknown senders' words are not kept for ever (issue 16, point 8): the lobby an unknown
//! sender's messages are recorded in — its row and visible entries, their text included —
//! expires 30 days after its last message, unless another message moves the date; a linked
//! user's conversation never does. On SQLite a sweep deletes exactly the expired lobby; on
//! DynamoDB (moto) every lobby item carries the table's `ttl` (moto does not delete; reads
//! treat an expired item as gone). A sender who returns after the date starts afresh.

use backend::{Reply, ScriptedModel};
use channel_jobs::{ChannelJobs, DEFAULT_LOBBY_RETENTION, JobOptions, JobOutcome};
use channels::{Delivered, Outgoing, SendError, Sender};
use engine::{Engine, EngineOptions};
use queue::TurnJob;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::Store;
use store_sqlite::SqliteStore;
use tests::moto::dynamo_table;
use tests::server::TestServer;
use tools::Registry;
use transcript::{Conversation, ConversationId};

const DAY_MS: i64 = 24 * 3_600_000;
const MINUTE: Duration = Duration::from_secs(60);
const LOBBY: &str = "whatsapp:4915550001111";
const ALICE: &str = "whatsapp:4915550002222@alice";

struct Platform;

#[async_trait::async_trait]
impl Sender for Platform {
    fn max_chars(&self) -> usize {
        4_000
    }
    fn has_reactions(&self) -> bool {
        false
    }
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        sent.pieces.push(reply.text.clone());
        Ok(())
    }
}

struct Setup {
    jobs: ChannelJobs,
    store: Arc<dyn Store>,
    now: Arc<AtomicI64>,
    start: i64,
}

/// The job path on `store`, its clock at the wall clock's now (DynamoDB judges `ttl` by it).
async fn setup(store: Arc<dyn Store>) -> Setup {
    let engine = Engine::new(
        Arc::new(ScriptedModel::new(vec![Reply::text("Hello Alice.")])),
        Arc::new(Registry::default()),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    );
    let mut senders: HashMap<String, Arc<dyn Sender>> = HashMap::new();
    senders.insert("whatsapp".into(), Arc::new(Platform));
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let now = Arc::new(AtomicI64::new(start));
    let clock = now.clone();
    store
        .bind_identity("whatsapp", "4915550002222", &"alice".into(), start)
        .await
        .unwrap();
    Setup {
        jobs: ChannelJobs {
            engine: Arc::new(engine),
            store: store.clone(),
            senders,
            options: JobOptions {
                metrics: metrics::Metrics::off(),
                clock: Arc::new(move || clock.load(Ordering::SeqCst)),
                ..JobOptions::default()
            },
        },
        store,
        now,
        start,
    }
}

impl Setup {
    fn at_day(&self, day: i64) -> i64 {
        let t = self.start + day * DAY_MS;
        self.now.store(t, Ordering::SeqCst);
        t
    }

    async fn message(&self, id: &str, sender: &str, text: &str) -> JobOutcome {
        let job = TurnJob {
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
        };
        self.jobs.run(&job, MINUTE).await
    }

    async fn visible_text(&self, id: &str) -> Vec<String> {
        let id = ConversationId::from(id);
        self.store
            .visible(&id)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.text)
            .collect()
    }

    /// A stranger writes their card number; Alice (linked) talks to the assistant.
    async fn both_write(&self) {
        let outcome = self
            .message("m-1", "4915550001111", "my card is 4111 1111")
            .await;
        assert!(matches!(outcome, JobOutcome::Answered(_)), "{outcome:?}");
        assert_eq!(
            self.message("m-2", "4915550002222", "hi").await,
            JobOutcome::Done
        );
        assert_eq!(self.visible_text(LOBBY).await[0], "my card is 4111 1111");
        assert_eq!(self.visible_text(ALICE).await, ["hi", "Hello Alice."]);
    }
}

#[test]
fn the_default_is_thirty_days() {
    assert_eq!(DEFAULT_LOBBY_RETENTION, Duration::from_secs(30 * 86_400));
}

#[tokio::test]
async fn on_sqlite_the_sweep_deletes_exactly_the_expired_lobby() {
    let sqlite = Arc::new(SqliteStore::open_in_memory().unwrap());
    let s = setup(sqlite.clone()).await;
    s.both_write().await;

    let day_29 = s.at_day(29);
    assert_eq!(s.store.sweep_expired(day_29).await.unwrap(), 0, "not yet");
    assert_eq!(s.visible_text(LOBBY).await.len(), 2);
    // A message on day 20 would have moved the date; none came: on day 31 the lobby goes.
    let day_31 = s.at_day(31);
    assert_eq!(s.store.sweep_expired(day_31).await.unwrap(), 1);
    assert_eq!(s.store.conversation(&LOBBY.into()).await.unwrap(), None);
    assert_eq!(s.visible_text(LOBBY).await, Vec::<String>::new());
    // Alice's conversation, her account and her binding are untouched.
    assert_eq!(s.visible_text(ALICE).await, ["hi", "Hello Alice."]);
    assert!(s.store.conversation(&ALICE.into()).await.unwrap().is_some());
    assert!(
        s.store
            .identity("whatsapp", "4915550002222")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn on_sqlite_each_message_moves_the_date_and_a_late_return_starts_afresh() {
    let s = setup(Arc::new(SqliteStore::open_in_memory().unwrap())).await;
    s.both_write().await;
    s.at_day(20);
    let outcome = s.message("m-3", "4915550001111", "hello?").await;
    assert!(matches!(outcome, JobOutcome::Answered(_)), "{outcome:?}");
    let day_31 = s.at_day(31);
    assert_eq!(
        s.store.sweep_expired(day_31).await.unwrap(),
        0,
        "moved to day 50"
    );
    assert_eq!(s.visible_text(LOBBY).await.len(), 4);
    // Day 60: past the date but not swept yet; the sender comes back.
    s.at_day(60);
    let outcome = s.message("m-4", "4915550001111", "anyone?").await;
    assert!(matches!(outcome, JobOutcome::Answered(_)), "{outcome:?}");
    let lobby = s.visible_text(LOBBY).await;
    assert_eq!(lobby.len(), 2, "{lobby:?}");
    assert_eq!(lobby[0], "anyone?", "the old words are gone");
}

#[tokio::test]
async fn on_dynamodb_every_lobby_item_carries_the_ttl_and_alices_none() {
    let (dynamo, table) = dynamo_table("lobby-ttl").await;
    let s = setup(dynamo).await;
    s.both_write().await;

    let client = raw_client();
    let expected = (s.start + 30 * DAY_MS).div_euclid(1000) + 1;
    let lobby = items(&client, &table, &format!("CONV#{LOBBY}")).await;
    let seen = lobby
        .iter()
        .filter(|(sk, _)| sk.starts_with("SEEN#"))
        .count();
    assert_eq!(seen, 2, "{lobby:?}");
    for (sk, ttl) in &lobby {
        if sk == "LEASE" {
            continue; // The lease's own expiry.
        }
        let ttl = ttl.unwrap_or_else(|| panic!("{sk} has no ttl"));
        // Rounded up to the second: never deleted before the date.
        assert!(
            (expected - 1..=expected).contains(&ttl),
            "{sk}: {ttl} vs {expected}"
        );
    }
    for (sk, ttl) in items(&client, &table, &format!("CONV#{ALICE}")).await {
        if sk != "LEASE" {
            assert_eq!(ttl, None, "Alice's {sk} never expires");
        }
    }
    // A message on day 20 moves every item's date to day 50.
    s.at_day(20);
    let outcome = s.message("m-3", "4915550001111", "hello?").await;
    assert!(matches!(outcome, JobOutcome::Answered(_)), "{outcome:?}");
    let moved = (s.start + 50 * DAY_MS).div_euclid(1000) + 1;
    let lobby = items(&client, &table, &format!("CONV#{LOBBY}")).await;
    assert_eq!(
        lobby
            .iter()
            .filter(|(sk, _)| sk.starts_with("SEEN#"))
            .count(),
        4
    );
    for (sk, ttl) in lobby.iter().filter(|(sk, _)| sk != "LEASE") {
        let ttl = ttl.unwrap();
        assert!((moved - 1..=moved).contains(&ttl), "{sk}: {ttl} vs {moved}");
    }
    assert_eq!(
        s.store.sweep_expired(s.at_day(60)).await.unwrap(),
        0,
        "TTL deletes"
    );
}

fn raw_client() -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(aws_types::region::Region::new("us-east-1"))
        .endpoint_url(std::env::var("AWS_ENDPOINT_URL").unwrap())
        .credentials_provider(aws_credential_types::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// `(sk, ttl)` of every item under `pk`.
async fn items(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
) -> Vec<(String, Option<i64>)> {
    use aws_sdk_dynamodb::types::AttributeValue;
    client
        .query()
        .table_name(table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(pk.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default()
        .into_iter()
        .map(|i| {
            let sk = i["sk"].as_s().unwrap().clone();
            let ttl = i.get("ttl").map(|t| t.as_n().unwrap().parse().unwrap());
            (sk, ttl)
        })
        .collect()
}

/// A lobby with one visible entry, its date `until_ms`.
async fn lobby_until(store: &dyn Store, id: &str, until_ms: i64, now_ms: i64) {
    let id = ConversationId::from(id);
    store
        .create_conversation(&Conversation::new(
            id.clone(),
            "unlinked:x",
            "whatsapp",
            "chat",
        ))
        .await
        .unwrap();
    store
        .append_visible(&store::VisibleEntry {
            conversation_id: id.clone(),
            position: 0,
            role: store::VisibleRole::User,
            text: "my card is 4111 1111".into(),
            buttons: vec![],
            reaction: None,
            turn: 1,
            created_at_ms: now_ms,
        })
        .await
        .unwrap();
    store
        .expire_conversation(&id, until_ms, now_ms)
        .await
        .unwrap();
}

async fn exists(store: &dyn Store, id: &str) -> bool {
    store.conversation(&id.into()).await.unwrap().is_some()
}

#[tokio::test(start_paused = true)]
async fn the_sweep_runs_at_start_then_every_hour_until_stopped() {
    use bridle::server::sweep::{SWEEP_EVERY, spawn_sweep};
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
    let t0 = 1_800_000_000_000;
    lobby_until(store.as_ref(), "whatsapp:1", t0 - 1, t0 - 2).await;
    lobby_until(store.as_ref(), "whatsapp:2", t0 + 30 * 60_000, t0).await;
    let now = Arc::new(AtomicI64::new(t0));
    let clock = now.clone();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = spawn_sweep(
        store.clone(),
        Arc::new(move || clock.load(Ordering::SeqCst)),
        SWEEP_EVERY,
        stopped,
    );

    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !exists(store.as_ref(), "whatsapp:1").await,
        "swept at start"
    );
    assert!(exists(store.as_ref(), "whatsapp:2").await, "not due yet");

    now.store(t0 + 61 * 60_000, Ordering::SeqCst);
    tokio::time::sleep(SWEEP_EVERY).await;
    assert!(
        !exists(store.as_ref(), "whatsapp:2").await,
        "swept an hour later"
    );

    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("the sweep stops with the server")
        .unwrap();
}

#[tokio::test]
async fn bridle_serve_sweeps_expired_lobbies_when_it_starts() {
    let model = Arc::new(ScriptedModel::new(vec![]));
    let app = bridle::build_app(model, bridle::AppOptions::default()).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    lobby_until(app.store.as_ref(), LOBBY, now - DAY_MS, now - 2 * DAY_MS).await;
    lobby_until(app.store.as_ref(), "telegram:42", now + DAY_MS, now).await;
    let store = app.store.clone();

    let server = TestServer::serve(app).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while exists(store.as_ref(), LOBBY).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the expired lobby was not swept"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(store.visible(&LOBBY.into()).await.unwrap().is_empty());
    assert!(
        exists(store.as_ref(), "telegram:42").await,
        "a lobby not yet due stays"
    );
    server.stop().await;
}
