//! Rails against hostile senders on the job path: a message stuffed with link-code guesses is
//! tried twice at most, a conversation key that ends in `@<user>` cannot reach that user's
//! conversation, and neither a stranger nor a linked sender over a cap can make us send a reply
//! per message (yet a reply the platform did not take is sent by the retry).

use backend::{Reply, ScriptedModel};
use channel_jobs::identity::Resolved;
use channel_jobs::{ChannelJobs, JobOptions, JobOutcome};
use channels::{Delivered, Outgoing, SendError, Sender};
use engine::{Engine, EngineOptions};
use queue::TurnJob;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{ConversationStore, Identities, VisibleStore};
use store_sqlite::SqliteStore;
use tools::Registry;
use transcript::ConversationId;

/// A platform that takes every reply, after failing the first `fail` (as a 503).
#[derive(Default)]
struct Platform(Mutex<Vec<Outgoing>>, AtomicUsize);

#[async_trait::async_trait]
impl Sender for Platform {
    fn max_chars(&self) -> usize {
        4_000
    }
    fn has_reactions(&self) -> bool {
        false
    }
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        if self
            .1
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(SendError::Retryable { status: 503 });
        }
        self.0.lock().unwrap().push(reply.clone());
        sent.pieces.push(reply.text.clone());
        Ok(())
    }
}

/// An engine on `store` with no tools, answering with `model`.
fn engine(store: &Arc<SqliteStore>, model: Arc<ScriptedModel>) -> Engine {
    Engine::new(
        model,
        Arc::new(Registry::default()),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    )
}

fn jobs(store: Arc<SqliteStore>, replies: Vec<Reply>) -> ChannelJobs {
    let engine = engine(&store, Arc::new(ScriptedModel::new(replies)));
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

/// [`jobs`], with the generic platform kept to read what it was sent.
fn watched(store: Arc<SqliteStore>, replies: Vec<Reply>) -> (ChannelJobs, Arc<Platform>) {
    let platform = Arc::new(Platform::default());
    let mut jobs = jobs(store, replies);
    jobs.senders.insert("generic".into(), platform.clone());
    (jobs, platform)
}

fn job(id: &str, user: &str, key: &str, text: &str) -> TurnJob {
    TurnJob {
        addressed_to: None,
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
    let (jobs, platform) = watched(store.clone(), vec![]);
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

#[tokio::test]
async fn an_onboarding_reply_the_platform_did_not_take_is_sent_by_the_retry() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(store.clone(), vec![]);
    platform.1.store(1, Ordering::SeqCst);
    let hello = job("m-1", "stranger", "c-9", "hello?");
    let outcome = jobs.run(&hello, MINUTE).await;
    assert!(matches!(outcome, JobOutcome::Failed(_)), "{outcome:?}");
    assert!(platform.0.lock().unwrap().is_empty());
    // The queue delivers it again: the hour's reply was not used up by the failed send.
    let outcome = jobs.run(&hello, MINUTE).await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::Unknown)),
        "{outcome:?}"
    );
    assert_eq!(platform.0.lock().unwrap().len(), 1);
    // And it was that hour's one.
    let outcome = jobs
        .run(&job("m-2", "stranger", "c-9", "hello??"), MINUTE)
        .await;
    assert!(matches!(outcome, JobOutcome::Skipped(_)), "{outcome:?}");
    assert_eq!(platform.0.lock().unwrap().len(), 1);
}

/// In a group chat, a second stranger's onboarding reply that the platform did not take is
/// sent by the retry, though the chat's last entry is the same reply to the first stranger: it
/// was written before this message came, so it is no record of this one's.
#[tokio::test]
async fn a_retried_reply_is_sent_though_the_same_words_were_said_before_to_another() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(store.clone(), vec![]);
    let mut first = job("m-1", "ana", "c-9", "hello?");
    first.received_at_ms = now_ms();
    let outcome = jobs.run(&first, MINUTE).await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::Unknown)),
        "{outcome:?}"
    );
    assert_eq!(platform.0.lock().unwrap().len(), 1);

    // Ben writes ten seconds later (past what the clocks may be apart).
    let mut second = job("m-2", "ben", "c-9", "hello?");
    second.received_at_ms = now_ms() + 10_000;
    platform.1.store(1, Ordering::SeqCst);
    let outcome = jobs.run(&second, MINUTE).await;
    assert!(matches!(outcome, JobOutcome::Failed(_)), "{outcome:?}");
    let outcome = jobs.run(&second, MINUTE).await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::Unknown)),
        "{outcome:?}"
    );
    let sent = platform.0.lock().unwrap().clone();
    assert_eq!(sent.len(), 2, "Ben got his reply: {sent:?}");
}

/// A linked sender past the conversation's messages an hour is told once that hour, not once
/// per message: each refusal would be a message we send (and on SMS, pay for). Their messages
/// are kept; the model is not called; and a refusal the platform did not take is sent by the
/// retry.
#[tokio::test]
async fn a_linked_sender_over_the_rate_is_told_once_an_hour_not_per_message() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let model = Arc::new(ScriptedModel::new([Reply::text("Hello Ana.")]));
    let mut config = budget::BudgetConfig::default();
    config.conversation_messages_per_hour.limit = Some(1);
    let clock: budget::Clock = Arc::new(now_ms);
    let rate = budget::ConversationRate::new(store.clone(), Arc::new(config), clock);
    let engine = engine(&store, model.clone()).with_guard(Arc::new(rate));
    let (mut jobs, platform) = watched(store.clone(), vec![]);
    jobs.engine = Arc::new(engine);
    store
        .bind_identity("generic", "ana", &"ana".into(), now_ms())
        .await
        .unwrap();

    let first = jobs.run(&job("m-0", "ana", "c-1", "hi"), MINUTE).await;
    assert_eq!(first, JobOutcome::Done);
    // The next message is refused; the platform fails to take the refusal once, and the
    // retry sends it.
    platform.1.store(1, Ordering::SeqCst);
    let over = job("m-1", "ana", "c-1", "and again");
    assert!(matches!(
        jobs.run(&over, MINUTE).await,
        JobOutcome::Failed(_)
    ));
    assert_eq!(jobs.run(&over, MINUTE).await, JobOutcome::Done);
    for n in 2..12 {
        let outcome = jobs
            .run(&job(&format!("m-{n}"), "ana", "c-1", "hello?"), MINUTE)
            .await;
        assert_eq!(outcome, JobOutcome::Done, "message {n}");
    }
    let sent: Vec<String> = platform
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.text.clone())
        .collect();
    assert_eq!(sent, ["Hello Ana.", budget::lines::CONVERSATION_BUSY]);
    assert_eq!(model.requests().len(), 1, "no model call past the rate");
    // Every message is kept in the transcript the user can read back.
    let conversation = &"generic:c-1@ana".into();
    let users = store
        .visible(conversation)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.role == store::VisibleRole::User)
        .count();
    assert_eq!(users, 12);
}

/// A platform that bills each message (as SMS does), otherwise [`Platform`].
#[derive(Default)]
struct Billed(Platform);

#[async_trait::async_trait]
impl Sender for Billed {
    fn max_chars(&self) -> usize {
        self.0.max_chars()
    }
    fn has_reactions(&self) -> bool {
        false
    }
    fn billed_segments(&self, _: &str) -> u32 {
        1
    }
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        self.0.send_from(reply, sent).await
    }
}

/// A refusal that costs (an SMS) is sent once an hour per account, not per sender: an account
/// with many numbers linked, each refused (paused, or over its dollars) once an hour, would be
/// texted the sentence on each. Its two numbers get one between them. Where replies are free,
/// each chat is told (one refusal must not silence the account's other chats).
#[tokio::test]
async fn a_refusal_that_costs_is_sent_once_an_hour_to_an_account_whatever_its_chats() {
    for billed in [true, false] {
        let store = Arc::new(SqliteStore::open_in_memory().unwrap());
        let model = Arc::new(ScriptedModel::new([Reply::text("never")]));
        let accounts = Arc::new(budget::InMemoryAccounts::default());
        accounts.pause(&"ana".into());
        let paused = budget::PausedAccounts::new(accounts);
        let engine = engine(&store, model.clone()).with_guard(Arc::new(paused));
        let mut jobs = jobs(store.clone(), vec![]);
        jobs.engine = Arc::new(engine);
        let platform = Arc::new(Billed::default());
        let sender: Arc<dyn Sender> = match billed {
            true => platform.clone(),
            false => Arc::new(WatchedFree(platform.clone())),
        };
        jobs.senders.insert("generic".into(), sender);
        for number in ["ana-phone", "ana-tablet"] {
            store
                .bind_identity("generic", number, &"ana".into(), now_ms())
                .await
                .unwrap();
        }
        for n in 0..6 {
            let (number, chat) = match n % 2 {
                0 => ("ana-phone", "c-1"),
                _ => ("ana-tablet", "c-2"),
            };
            let outcome = jobs
                .run(&job(&format!("m-{n}"), number, chat, "hi"), MINUTE)
                .await;
            assert_eq!(outcome, JobOutcome::Done, "message {n}");
        }
        let sent: Vec<String> = platform
            .0
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.text.clone())
            .collect();
        let told = if billed { 1 } else { 2 };
        assert_eq!(
            sent,
            vec![budget::lines::ACCOUNT_PAUSED; told],
            "billed: {billed}"
        );
        assert!(model.requests().is_empty());
    }
}

/// [`Billed`]'s platform, billing nothing.
struct WatchedFree(Arc<Billed>);

#[async_trait::async_trait]
impl Sender for WatchedFree {
    fn max_chars(&self) -> usize {
        self.0.max_chars()
    }
    fn has_reactions(&self) -> bool {
        false
    }
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        self.0.send_from(reply, sent).await
    }
}

/// A platform that refuses every reply for good (a blocked user: HTTP 403).
#[derive(Default)]
struct Refusing(AtomicUsize);

#[async_trait::async_trait]
impl Sender for Refusing {
    fn max_chars(&self) -> usize {
        4_000
    }
    fn has_reactions(&self) -> bool {
        false
    }
    async fn send_from(&self, _: &Outgoing, _: &mut Delivered) -> Result<(), SendError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(SendError::Rejected {
            status: 403,
            reason: "the user blocked the bot".into(),
        })
    }
}

/// A reply the platform refuses for good is not tried again (each retry would send again what
/// went out before the refusal, and be refused the same way): the turn's reply is recorded,
/// the job done, and its redelivery skipped.
#[tokio::test]
async fn a_reply_refused_for_good_is_recorded_and_not_tried_again() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let refusing = Arc::new(Refusing::default());
    let mut jobs = jobs(store.clone(), vec![Reply::text("Hello Ana.")]);
    jobs.senders.insert("generic".into(), refusing.clone());
    store
        .bind_identity("generic", "ana", &"ana".into(), now_ms())
        .await
        .unwrap();
    let hi = job("m-0", "ana", "c-1", "hi");
    assert_eq!(jobs.run(&hi, MINUTE).await, JobOutcome::Done);
    assert_eq!(refusing.0.load(Ordering::SeqCst), 1);
    let conversation = "generic:c-1@ana".into();
    let said: Vec<String> = store
        .visible(&conversation)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(said, ["hi", "Hello Ana."]);
    let again = jobs.run(&hi, MINUTE).await;
    assert!(matches!(again, JobOutcome::Skipped(_)), "{again:?}");
    assert_eq!(refusing.0.load(Ordering::SeqCst), 1, "not sent again");
}

/// The harness's own reply (onboarding) refused for good is not tried again either: the job is
/// answered, and its redelivery skipped.
#[tokio::test]
async fn a_harness_reply_refused_for_good_is_not_tried_again() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let refusing = Arc::new(Refusing::default());
    let mut jobs = jobs(store.clone(), vec![]);
    jobs.senders.insert("generic".into(), refusing.clone());
    let hello = job("m-1", "stranger", "c-9", "hello?");
    let outcome = jobs.run(&hello, MINUTE).await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::Unknown)),
        "{outcome:?}"
    );
    let again = jobs.run(&hello, MINUTE).await;
    assert!(matches!(again, JobOutcome::Skipped(_)), "{again:?}");
    assert_eq!(refusing.0.load(Ordering::SeqCst), 1, "not sent again");
}

/// A platform that refuses Bridle's own token (expired, rotated) until the operator fixes it,
/// then takes every reply; or, when `rate_limited`, asks for a wait instead.
#[derive(Default)]
struct TokenRefused {
    fixed: std::sync::atomic::AtomicBool,
    rate_limited: bool,
    taken: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl Sender for TokenRefused {
    fn max_chars(&self) -> usize {
        4_000
    }
    fn has_reactions(&self) -> bool {
        false
    }
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        if !self.fixed.load(Ordering::SeqCst) {
            return Err(if self.rate_limited {
                SendError::RateLimited {
                    retry_after: Some(Duration::from_secs(40)),
                }
            } else {
                SendError::Unauthorized {
                    reason: "the bot token was refused".into(),
                }
            });
        }
        self.taken.lock().unwrap().push(reply.text.clone());
        sent.pieces.push(reply.text.clone());
        Ok(())
    }
}

/// A reply the platform did not take because Bridle's token was refused is not recorded as
/// said, nor the job done: it fails (as the queue retries it, then keeps it in the dead
/// letters), and once the token is fixed the same job delivers the turn's reply, once, without
/// running the model again.
#[tokio::test]
async fn a_reply_refused_for_a_bad_token_waits_for_the_fix_and_is_not_lost() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let platform = Arc::new(TokenRefused::default());
    let mut jobs = jobs(store.clone(), vec![Reply::text("Hello Ana.")]);
    jobs.senders.insert("generic".into(), platform.clone());
    store
        .bind_identity("generic", "ana", &"ana".into(), now_ms())
        .await
        .unwrap();
    let hi = job("m-0", "ana", "c-1", "hi");
    let conversation: ConversationId = "generic:c-1@ana".into();
    let said = || async {
        let entries = store.visible(&conversation).await.unwrap();
        entries.into_iter().map(|e| e.text).collect::<Vec<_>>()
    };
    for _ in 0..2 {
        let failed = jobs.run(&hi, MINUTE).await;
        let JobOutcome::Failed(why) = &failed else {
            panic!("{failed:?}")
        };
        assert!(why.to_string().contains("credentials"), "{why}");
        assert_eq!(why.retry_after(), None);
        assert_eq!(said().await, ["hi"], "nothing recorded as said");
    }
    platform.fixed.store(true, Ordering::SeqCst);
    assert_eq!(jobs.run(&hi, MINUTE).await, JobOutcome::Done);
    assert_eq!(*platform.taken.lock().unwrap(), ["Hello Ana."]);
    assert_eq!(said().await, ["hi", "Hello Ana."]);
    let again = jobs.run(&hi, MINUTE).await;
    assert!(matches!(again, JobOutcome::Skipped(_)), "{again:?}");
    assert_eq!(platform.taken.lock().unwrap().len(), 1, "sent once");
}

/// A platform's rate limit with nothing sent yet fails the attempt with the wait it asked for,
/// which the queues hold the job's next attempt to.
#[tokio::test]
async fn a_rate_limited_reply_fails_with_the_wait_the_platform_asked_for() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let platform = Arc::new(TokenRefused {
        rate_limited: true,
        ..TokenRefused::default()
    });
    let mut jobs = jobs(store.clone(), vec![Reply::text("Hello Ana.")]);
    jobs.senders.insert("generic".into(), platform.clone());
    store
        .bind_identity("generic", "ana", &"ana".into(), now_ms())
        .await
        .unwrap();
    let hi = job("m-0", "ana", "c-1", "hi");
    let failed = jobs.run(&hi, MINUTE).await;
    let JobOutcome::Failed(why) = &failed else {
        panic!("{failed:?}")
    };
    assert_eq!(why.retry_after(), Some(Duration::from_secs(40)));
    platform.fixed.store(true, Ordering::SeqCst);
    assert_eq!(jobs.run(&hi, MINUTE).await, JobOutcome::Done);
    assert_eq!(*platform.taken.lock().unwrap(), ["Hello Ana."]);
}

/// A platform account with one address of several, `"ours"` (as a WhatsApp sender has one number
/// of its Meta app).
struct OneNumber(Platform);

#[async_trait::async_trait]
impl Sender for OneNumber {
    fn max_chars(&self) -> usize {
        self.0.max_chars()
    }
    fn has_reactions(&self) -> bool {
        false
    }
    fn answers_to(&self, address: &str) -> bool {
        address == "ours"
    }
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        self.0.send_from(reply, sent).await
    }
}

/// A message sent to another of the account's addresses runs nothing and writes nothing here,
/// not even the job's claim: the same message id, were it ours, would still be answered. Given
/// up for good (a dead letter sent again by hand), it tells nobody anything.
#[tokio::test]
async fn a_message_to_another_address_of_the_account_is_not_answered_or_given_up() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let platform = Arc::new(OneNumber(Platform::default()));
    let mut jobs = jobs(store.clone(), vec![Reply::text("Hello Ana.")]);
    jobs.senders.insert("generic".into(), platform.clone());
    store
        .bind_identity("generic", "ana", &"ana".into(), now_ms())
        .await
        .unwrap();
    let theirs = TurnJob {
        addressed_to: Some("theirs".into()),
        ..job("m-1", "ana", "c-1", "hello")
    };
    let outcome = jobs.run(&theirs, MINUTE).await;
    assert_eq!(
        outcome,
        JobOutcome::Skipped("sent to an address this deployment does not answer for")
    );
    assert!(!jobs.give_up_for_good(&theirs).await.unwrap());
    assert!(platform.0.0.lock().unwrap().is_empty(), "nothing sent");
    let conversation: transcript::ConversationId = "generic:c-1@ana".into();
    assert_eq!(store.conversation(&conversation).await.unwrap(), None);

    // No claim was left: the same id, addressed to us, is answered.
    let ours = TurnJob {
        addressed_to: Some("ours".into()),
        ..theirs.clone()
    };
    assert_eq!(jobs.run(&ours, MINUTE).await, JobOutcome::Done);
    let sent = platform.0.0.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].text, "Hello Ana.");
}

/// A dead letter sent again by hand after later messages were answered, and given up once more,
/// does not tell its user a second time: they were told when it was first given up, and newer
/// messages have had their answers since.
#[tokio::test]
async fn a_dead_letter_given_up_again_after_later_turns_tells_nobody_twice() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(
        store.clone(),
        vec![Reply::text("First answer."), Reply::text("Second answer.")],
    );
    store
        .bind_identity("generic", "ana", &"ana".into(), now_ms())
        .await
        .unwrap();
    let first = job("m-1", "ana", "c-1", "first");
    // Its reply is refused on its last attempt: given up, the user told.
    platform.1.store(1, Ordering::SeqCst);
    assert!(matches!(
        jobs.run(&first, MINUTE).await,
        JobOutcome::Failed(_)
    ));
    jobs.give_up_for_good(&first).await.unwrap();
    assert_eq!(texts(&platform), [engine::lines::GAVE_UP]);
    // The conversation goes on.
    let second = job("m-2", "ana", "c-1", "second");
    assert_eq!(jobs.run(&second, MINUTE).await, JobOutcome::Done);
    // The dead letter, sent again, is not run on its last receive (no time left, say) and is
    // given up: nothing more reaches the user.
    assert!(matches!(
        jobs.run(&first, Duration::ZERO).await,
        JobOutcome::Failed(_)
    ));
    assert!(!jobs.give_up_for_good(&first).await.unwrap());
    assert_eq!(texts(&platform), [engine::lines::GAVE_UP, "Second answer."]);
}

/// The conversation of Ana's number `generic:c-1` (linked to her account), holding `rows`,
/// at segment `segment`.
async fn ana_conversation(
    store: &Arc<SqliteStore>,
    rows: Vec<transcript::Message>,
    segment: u32,
) -> ConversationId {
    use store::MessageStore;
    store
        .bind_identity("generic", "ana", &"ana".into(), now_ms())
        .await
        .unwrap();
    let id = ConversationId::from("generic:c-1@ana");
    let mut conversation = transcript::Conversation::new(id.clone(), "ana", "generic", "chat");
    store.create_conversation(&conversation).await.unwrap();
    for message in rows {
        store.append_message(&message).await.unwrap();
    }
    conversation.segment = segment;
    store.update_conversation(&conversation).await.unwrap();
    id
}

/// A row of `of`'s turn in Ana's conversation, written at `at`; with a call record ending for
/// `stop` when given (a model's answer, or a compaction's notes).
fn row(
    (segment, position): (u32, u64),
    role: transcript::Role,
    parts: Vec<transcript::Part>,
    of: &TurnJob,
    at: i64,
    stop: Option<transcript::StopReason>,
) -> transcript::Message {
    transcript::Message {
        conversation_id: "generic:c-1@ana".into(),
        segment,
        position,
        role,
        parts,
        call: stop.map(|stop| transcript::CallRecord {
            backend: "scripted".into(),
            model: "m".into(),
            stop_reason: Some(stop),
            error: None,
            usage: Default::default(),
            latency_ms: 1,
            tools_offered: Vec::new(),
        }),
        action_id: Some(of.dedupe_key()),
        created_at_ms: at,
    }
}

/// Nothing was written: segment `segment` holds its `rows` rows still, and no visible entry.
async fn nothing_written(store: &SqliteStore, id: &ConversationId, segment: u32, rows: usize) {
    use store::MessageStore;
    let stored = store.messages(id, segment).await.unwrap().len();
    assert_eq!(stored, rows, "no row written");
    assert!(
        store.visible(id).await.unwrap().is_empty(),
        "no entry written"
    );
}

/// Ana's conversation with her first message's turn left after its tool results and, when
/// `overtaken`, her second's under way, asking for a call: the first job, the second, and the
/// conversation.
async fn ana_first(
    store: &Arc<SqliteStore>,
    overtaken: bool,
) -> (TurnJob, TurnJob, ConversationId) {
    use transcript::{Part, Role, StopReason};
    let first = job("m-1", "ana", "c-1", "first");
    let later = job("m-2", "ana", "c-1", "second");
    let asks = |call: &str| Part::ToolUse {
        id: call.into(),
        name: "look_up".into(),
        input: serde_json::json!({}),
    };
    let result = Part::ToolResult {
        tool_use_id: "a".into(),
        content: serde_json::json!({"found": 1}),
        is_error: false,
    };
    let answer = Some(StopReason::ToolUse);
    let mut rows = vec![
        row(
            (0, 0),
            Role::User,
            vec![Part::text("first")],
            &first,
            1,
            None,
        ),
        row(
            (0, 1),
            Role::Assistant,
            vec![asks("a")],
            &first,
            1,
            answer.clone(),
        ),
        row((0, 2), Role::Tool, vec![result], &first, 1, None),
    ];
    if overtaken {
        rows.push(row(
            (0, 3),
            Role::User,
            vec![Part::text("second")],
            &later,
            1,
            None,
        ));
        rows.push(row(
            (0, 4),
            Role::Assistant,
            vec![asks("b")],
            &later,
            1,
            answer,
        ));
    }
    let id = ana_conversation(store, rows, 0).await;
    (first, later, id)
}

fn texts(platform: &Platform) -> Vec<String> {
    platform
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|o| o.text.clone())
        .collect()
}

/// A message whose every attempt failed while a later message's turn was already under way
/// (it took the conversation's lease as the last attempt gave it back) is still answered with
/// the apology, and nothing is written into the later turn: neither a transcript row nor a
/// visible entry, which would stand in for that turn's own reply.
#[tokio::test]
async fn a_message_given_up_after_a_later_one_began_is_still_told_and_writes_nothing() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(store.clone(), vec![]);
    let (first, _, id) = ana_first(&store, true).await;

    assert!(!jobs.give_up_for_good(&first).await.unwrap());
    assert_eq!(
        texts(&platform),
        [engine::lines::GAVE_UP],
        "the sender is told"
    );
    nothing_written(&store, &id, 0, 5).await;
}

/// A message given up before it was ever stored (its attempts waited for the conversation
/// while another message's turn ran, then ran out of time) is told, and writes nothing: its
/// apology recorded under the turn under way stood in for that turn's reply, which then went
/// unrecorded (the page and the history showed "couldn't process" where the answer was).
#[tokio::test]
async fn a_message_given_up_before_it_was_stored_writes_nothing_into_the_turn_under_way() {
    use store::VisibleStore;
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(store.clone(), vec![]);
    let running = job("m-2", "ana", "c-1", "second");
    let rows = vec![row(
        (0, 0),
        transcript::Role::User,
        vec![transcript::Part::text("second")],
        &running,
        1,
        None,
    )];
    let id = ana_conversation(&store, rows, 0).await;
    let mut conversation = store.conversation(&id).await.unwrap().unwrap();
    conversation.turn = 1;
    store.update_conversation(&conversation).await.unwrap();
    store
        .append_visible(&store::VisibleEntry {
            conversation_id: id.clone(),
            position: 0,
            role: store::VisibleRole::User,
            text: "second".into(),
            buttons: Vec::new(),
            reaction: None,
            turn: 1,
            created_at_ms: 1,
        })
        .await
        .unwrap();

    let never_stored = job("m-3", "ana", "c-1", "third");
    jobs.give_up_for_good(&never_stored).await.unwrap();
    assert_eq!(
        texts(&platform),
        [engine::lines::GAVE_UP],
        "the sender is told"
    );
    let visible = store.visible(&id).await.unwrap();
    assert_eq!(
        visible.len(),
        1,
        "nothing written into the turn under way: {visible:?}"
    );
}

/// That message's dead letter, given up while the later turn was under way, sent again by hand
/// (`bridle jobs retry`, an SQS redrive): the give-up marked it done, so it is skipped at its
/// claim, without reading the transcript (the segments a later compaction moved on from are
/// `a_dead_letter_sent_again_after_a_later_turn_compacted_runs_nothing_of_it`'s).
#[tokio::test]
async fn a_given_up_dead_letter_sent_again_is_skipped() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(store.clone(), vec![Reply::text("never said")]);
    let (first, _, id) = ana_first(&store, true).await;
    assert!(!jobs.give_up_for_good(&first).await.unwrap());

    assert!(matches!(
        jobs.run(&first, MINUTE).await,
        JobOutcome::Skipped(_)
    ));
    assert_eq!(
        texts(&platform),
        [engine::lines::GAVE_UP],
        "nothing more sent"
    );
    nothing_written(&store, &id, 0, 5).await;
}

/// A job that reached the dead letters without a give-up (busy on its last attempt, or out of
/// time to give up) and is sent again while a later message's turn is still open runs
/// nothing: resumed, it read the later turn's rows as its own and ran the call that turn asked
/// for, under its own action, then sent the model's answer to a message long past. The later
/// message's own retry then runs its call, once.
#[tokio::test]
async fn a_dead_letter_sent_again_after_a_later_turn_began_runs_nothing_of_it() {
    use store::MessageStore;
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(
        store.clone(),
        vec![Reply::text("Second answer."), Reply::text("Third answer.")],
    );
    let (first, later, id) = ana_first(&store, true).await;

    assert_eq!(jobs.run(&first, MINUTE).await, JobOutcome::Done);
    assert!(texts(&platform).is_empty(), "nothing sent");
    nothing_written(&store, &id, 0, 5).await;
    // Done: sent again once more, it is skipped outright.
    assert!(matches!(
        jobs.run(&first, MINUTE).await,
        JobOutcome::Skipped(_)
    ));

    assert_eq!(jobs.run(&later, MINUTE).await, JobOutcome::Done);
    assert_eq!(texts(&platform), ["Second answer."]);
    let rows = store.messages(&id, 0).await.unwrap();
    let results: Vec<_> = rows
        .iter()
        .filter(|m| m.role == transcript::Role::Tool)
        .collect();
    assert_eq!(results.len(), 2, "call b answered once, by its own turn");
    assert_eq!(
        results[1].action_id.as_deref(),
        Some(later.dedupe_key().as_str())
    );
}

/// A message given up whose apology the platform did not take is not marked done: sent again
/// from the dead letters (once the platform is back), its closed turn resumes and says the
/// apology then.
#[tokio::test]
async fn a_given_up_message_whose_apology_failed_is_told_when_sent_again() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(store.clone(), vec![]);
    let (first, _, _) = ana_first(&store, false).await;
    platform.1.store(1, Ordering::SeqCst);
    assert!(jobs.give_up_for_good(&first).await.unwrap(), "closed");
    assert!(texts(&platform).is_empty(), "the apology failed");

    assert_eq!(jobs.run(&first, MINUTE).await, JobOutcome::Done);
    assert_eq!(texts(&platform), [engine::lines::GAVE_UP]);
}

/// Ana's conversation where a later turn's compaction opened segment 1 after her first message
/// (received at 1,000 ms, its turn left open after its message in segment 0): the first job
/// and the conversation.
async fn compacted_past_first(store: &Arc<SqliteStore>) -> (TurnJob, ConversationId) {
    use transcript::{Part, Role, StopReason};
    let mut first = job("m-1", "ana", "c-1", "first");
    first.received_at_ms = 1_000;
    let later = job("m-2", "ana", "c-1", "second");
    let text = |t: &str| vec![Part::text(t)];
    let called = Some(StopReason::EndTurn);
    let rows = vec![
        row((0, 0), Role::User, text("first"), &first, 1_500, None),
        // The later turn compacted first: its notes open segment 1, then its message, answered.
        row(
            (1, 1),
            Role::User,
            text("notes"),
            &later,
            5_000,
            called.clone(),
        ),
        row((1, 2), Role::User, text("second"), &later, 5_000, None),
        row(
            (1, 3),
            Role::Assistant,
            text("Second answer."),
            &later,
            5_000,
            called,
        ),
    ];
    (first, ana_conversation(store, rows, 1).await)
}

/// A dead letter sent again once a later turn's compaction opened a new segment: its message
/// is in the segment before, where a turn reading the current one does not see it. Run as new
/// it would answer a message long past after newer answers (and do again what it asked for);
/// it is found there and runs nothing.
#[tokio::test]
async fn a_dead_letter_sent_again_after_a_later_turn_compacted_runs_nothing_of_it() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(store.clone(), vec![Reply::text("Never said.")]);
    let (first, id) = compacted_past_first(&store).await;

    assert_eq!(jobs.run(&first, MINUTE).await, JobOutcome::Done);
    assert!(texts(&platform).is_empty(), "nothing sent");
    nothing_written(&store, &id, 1, 3).await;
}

/// Given up, such a message is found in the segment before too: overtaken, its sender is told
/// and nothing is written into the later turn's transcript (an entry would stand in for that
/// turn's reply).
#[tokio::test]
async fn a_message_given_up_after_a_later_turn_compacted_is_told_and_writes_nothing() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(store.clone(), vec![]);
    let (first, id) = compacted_past_first(&store).await;

    assert!(!jobs.give_up_for_good(&first).await.unwrap());
    assert_eq!(texts(&platform), [engine::lines::GAVE_UP]);
    nothing_written(&store, &id, 1, 3).await;
}

/// A job cut off between its own compaction and its message (its notes open the current
/// segment) is not taken for one a later turn overtook: sent again, it runs, after its notes.
#[tokio::test]
async fn a_job_cut_off_after_its_own_compaction_still_runs() {
    use store::MessageStore;
    use transcript::{Part, Role, StopReason};
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, platform) = watched(store.clone(), vec![Reply::text("First answer.")]);
    let before = job("m-0", "ana", "c-1", "hello");
    let mut first = job("m-1", "ana", "c-1", "first");
    first.received_at_ms = 1_000;
    let text = |t: &str| vec![Part::text(t)];
    let called = Some(StopReason::EndTurn);
    let rows = vec![
        row((0, 0), Role::User, text("hello"), &before, 500, None),
        row(
            (0, 1),
            Role::Assistant,
            text("Hello."),
            &before,
            500,
            called.clone(),
        ),
        row((1, 2), Role::User, text("notes"), &first, 1_500, called),
    ];
    let id = ana_conversation(&store, rows, 1).await;

    assert_eq!(jobs.run(&first, MINUTE).await, JobOutcome::Done);
    assert_eq!(texts(&platform), ["First answer."]);
    assert_eq!(
        store.messages(&id, 1).await.unwrap().len(),
        3,
        "its message and answer"
    );
}
