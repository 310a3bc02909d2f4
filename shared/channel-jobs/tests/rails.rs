//! Rails against hostile senders on the job path: a message stuffed with link-code guesses is
//! tried twice at most, and a conversation key that ends in `@<user>` cannot reach that user's
//! conversation.

use backend::{Reply, ScriptedModel};
use channel_jobs::identity::Resolved;
use channel_jobs::{ChannelJobs, JobOptions, JobOutcome};
use channels::{Delivered, Outgoing, SendError, Sender};
use engine::{Engine, EngineOptions};
use queue::TurnJob;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{ConversationStore, Identities, VisibleStore};
use store_sqlite::SqliteStore;
use tools::Registry;

#[derive(Default)]
struct Platform(Mutex<Vec<Outgoing>>);

#[async_trait::async_trait]
impl Sender for Platform {
    fn max_chars(&self) -> usize {
        4_000
    }
    fn has_reactions(&self) -> bool {
        false
    }
    async fn send(&self, reply: &Outgoing) -> Result<Delivered, SendError> {
        self.0.lock().unwrap().push(reply.clone());
        Ok(Delivered {
            pieces: vec![reply.text.clone()],
            reacted: false,
        })
    }
}

fn jobs(store: Arc<SqliteStore>, replies: Vec<Reply>) -> ChannelJobs {
    let engine = Engine::new(
        Arc::new(ScriptedModel::new(replies)),
        Arc::new(Registry::default()),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    );
    let mut senders: HashMap<String, Arc<dyn Sender>> = HashMap::new();
    senders.insert("generic".into(), Arc::new(Platform::default()));
    ChannelJobs {
        engine: Arc::new(engine),
        store,
        senders,
        options: JobOptions {
            metrics: metrics::Metrics::off(),
            ..JobOptions::default()
        },
    }
}

fn job(id: &str, user: &str, key: &str, text: &str) -> TurnJob {
    TurnJob {
        trace_context: Default::default(),
        channel: "generic".into(),
        message_id: id.into(),
        conversation_key: key.into(),
        external_user_id: user.into(),
        text: text.into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: 0,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

const MINUTE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_message_full_of_code_guesses_is_tried_twice_at_most() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let jobs = jobs(store.clone(), vec![]);
    store
        .create_link_code("K7PQ2345", &"alice".into(), now_ms(), now_ms() + 600_000)
        .await
        .unwrap();
    // 300 wrong guesses, the real code last.
    let mut words: Vec<String> = (0..300).map(|i| format!("AB{i:02}CD{i:02}")).collect();
    words.push("K7PQ-2345".into());
    let outcome = jobs
        .run(&job("m-1", "mallory", "c-1", &words.join(" ")), MINUTE)
        .await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::StaleCode { .. })),
        "{outcome:?}"
    );
    assert_eq!(store.identity("generic", "mallory").await.unwrap(), None);
    // The code is still good for a real attempt.
    let outcome = jobs
        .run(&job("m-2", "bob", "c-2", "K7PQ-2345"), MINUTE)
        .await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::Linked(_))),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_key_ending_in_at_user_cannot_reach_that_users_conversation() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let jobs = jobs(store.clone(), vec![Reply::text("Hello Local.")]);
    // The local user is linked on chat "room" and has talked there.
    store
        .bind_identity("generic", "u-local", &"local".into(), now_ms())
        .await
        .unwrap();
    assert_eq!(
        jobs.run(&job("m-1", "u-local", "room", "my plans"), MINUTE)
            .await,
        JobOutcome::Done
    );
    let theirs: transcript::ConversationId = "generic:room@local".into();
    let before = store.visible(&theirs).await.unwrap();
    assert_eq!(before.len(), 2);
    // An unlinked sender picks the key `room@local`.
    let outcome = jobs
        .run(&job("m-2", "u-mallory", "room@local", "hello?"), MINUTE)
        .await;
    assert!(matches!(outcome, JobOutcome::Answered(_)), "{outcome:?}");
    assert_eq!(
        store.visible(&theirs).await.unwrap(),
        before,
        "nothing was written into the local user's conversation"
    );
    let lobby = store
        .conversation(&"generic:room%40local".into())
        .await
        .unwrap()
        .expect("the sender's own lobby");
    assert!(lobby.user_id.0.starts_with("unlinked:"));
}

#[tokio::test]
async fn an_unknown_sender_gets_one_onboarding_reply_an_hour_however_much_they_write() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let platform = Arc::new(Platform::default());
    let mut jobs = jobs(store.clone(), vec![]);
    jobs.senders.insert("generic".into(), platform.clone());
    let mut answered = 0;
    for n in 0..50 {
        let outcome = jobs
            .run(&job(&format!("m-{n}"), "stranger", "c-9", "hello?"), MINUTE)
            .await;
        answered += usize::from(matches!(outcome, JobOutcome::Answered(Resolved::Unknown)));
    }
    assert_eq!(answered, 1);
    assert_eq!(platform.0.lock().unwrap().len(), 1, "one reply sent");
    // Another sender is answered as usual.
    let outcome = jobs
        .run(&job("m-x", "someone-else", "c-8", "hi"), MINUTE)
        .await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::Unknown)),
        "{outcome:?}"
    );
}
