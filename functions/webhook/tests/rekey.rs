//! A signing secret rotated while the webhook runs: a failed signature reads the secrets again
//! (at most once a minute per instance, however many failures come), and what they hold now
//! verifies; a read that fails leaves the channels read before. The secret store here is a
//! closure over a value the test rotates; `bootstrap.rs` does it with Secrets Manager in moto.

use channels::Channel;
use channels::generic::{GenericChannel, sign};
use queue::QueueSettings;
use queue_sqlite::SqliteQueue;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use webhook::{Incoming, REKEY_EVERY, ReadAgain, Webhook};

const OLD: &str = "old-secret-0123456789abcdef-0123";
const NEW: &str = "new-secret-0123456789abcdef-4567";
const NOW_S: i64 = 1_800_000_000;

/// What the secret holds now (`None`: it cannot be read), and how often it was read.
#[derive(Default)]
struct SecretStore {
    value: Mutex<Option<String>>,
    reads: AtomicUsize,
}

impl SecretStore {
    fn holding(value: &str) -> Arc<Self> {
        let store = Arc::new(Self::default());
        store.rotate(Some(value));
        store
    }

    fn rotate(&self, value: Option<&str>) {
        *self.value.lock().unwrap() = value.map(str::to_owned);
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    fn reader(self: &Arc<Self>) -> ReadAgain {
        let store = self.clone();
        Arc::new(move || {
            let store = store.clone();
            Box::pin(async move {
                store.reads.fetch_add(1, Ordering::SeqCst);
                let value = store.value.lock().unwrap().clone();
                let value = value.ok_or_else(|| "secret unreadable".to_owned())?;
                Ok(vec![
                    Arc::new(GenericChannel::new(value)) as Arc<dyn Channel>
                ])
            })
        })
    }
}

/// The webhook as a cold start builds it from `secrets`, reading them again on a bad signature.
fn webhook(secrets: &Arc<SecretStore>) -> Webhook {
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let value = secrets.value.lock().unwrap().clone().unwrap();
    Webhook::new(vec![Arc::new(GenericChannel::new(value))], queue, 4096)
        .with_rekey(secrets.reader())
}

/// A message delivery `id` signed with `secret` at `now_s`; the status it gets.
async fn deliver(webhook: &Webhook, id: &str, secret: &str, now_s: i64) -> u16 {
    let body = format!(
        r#"{{"type": "message", "id": "{id}", "user": "u-1", "conversation": "c-1", "text": "hi"}}"#
    );
    let headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("x-bridle-timestamp".to_owned(), now_s.to_string()),
        (
            "x-bridle-signature".to_owned(),
            sign(secret.as_bytes(), now_s, body.as_bytes()),
        ),
    ];
    let req = Incoming {
        method: "POST",
        path: "/webhooks/generic",
        query: None,
        headers: &headers,
        body: body.as_bytes(),
        now_ms: now_s * 1000,
        origin: None,
    };
    webhook.handle(req).await.status
}

#[tokio::test]
async fn a_rotated_secret_is_read_again_on_a_failed_signature_at_most_once_a_minute() {
    let secrets = SecretStore::holding(OLD);
    let hook = webhook(&secrets);
    assert_eq!(deliver(&hook, "m-1", OLD, NOW_S).await, 200);
    assert_eq!(secrets.reads(), 0, "a good signature reads nothing");

    // The operator rotates the secret; the platform signs with the new one.
    secrets.rotate(Some(NEW));
    assert_eq!(deliver(&hook, "m-2", NEW, NOW_S + 1).await, 200);
    assert_eq!(secrets.reads(), 1);
    assert_eq!(deliver(&hook, "m-3", NEW, NOW_S + 2).await, 200);
    assert_eq!(secrets.reads(), 1, "the new secret is kept");
    // The old one no longer verifies, and junk within the minute reads nothing more, however
    // much of it comes at once.
    assert_eq!(deliver(&hook, "m-4", OLD, NOW_S + 3).await, 401);
    let junk = (0..50).map(|i| {
        let hook = &hook;
        async move {
            deliver(
                hook,
                &format!("j-{i}"),
                "guess-0123456789abcdef-0123",
                NOW_S + 4,
            )
            .await
        }
    });
    let statuses = futures::future::join_all(junk).await;
    assert!(statuses.iter().all(|s| *s == 401), "{statuses:?}");
    assert_eq!(secrets.reads(), 1, "at most one read a minute");

    // A minute on, failures read again: once, however many come at that moment.
    let later = NOW_S + 4 + REKEY_EVERY.as_secs() as i64;
    let burst = (0..20).map(|i| {
        let hook = &hook;
        async move { deliver(hook, &format!("m-5-{i}"), OLD, later).await }
    });
    let statuses = futures::future::join_all(burst).await;
    assert!(statuses.iter().all(|s| *s == 401), "{statuses:?}");
    assert_eq!(deliver(&hook, "m-6", OLD, later).await, 401);
    assert_eq!(secrets.reads(), 2);
    assert_eq!(deliver(&hook, "m-7", NEW, later + 1).await, 200);
}

#[tokio::test]
async fn a_read_that_fails_keeps_the_channels_read_before() {
    let secrets = SecretStore::holding(OLD);
    let hook = webhook(&secrets);
    secrets.rotate(None);
    assert_eq!(deliver(&hook, "m-1", NEW, NOW_S).await, 401);
    assert_eq!(secrets.reads(), 1);
    assert_eq!(
        deliver(&hook, "m-2", OLD, NOW_S + 1).await,
        200,
        "the secret read at cold start still verifies"
    );
    assert_eq!(hook.channel_names(), ["generic"]);
}

#[tokio::test]
async fn without_a_reader_a_failed_signature_reads_nothing() {
    let secrets = SecretStore::holding(OLD);
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let hook = Webhook::new(vec![Arc::new(GenericChannel::new(OLD))], queue, 4096);
    secrets.rotate(Some(NEW));
    assert_eq!(deliver(&hook, "m-1", NEW, NOW_S).await, 401);
    assert_eq!(secrets.reads(), 0);
}
