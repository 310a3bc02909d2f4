//! `bridle jobs dead` and `bridle jobs retry` on the built binary: on a queue file with a dead
//! job in it, and on AWS on moto's SQS dead-letter queue.

use queue::{JobQueue, QueueSettings, TurnJob};
use queue_sqlite::SqliteQueue;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn bridle(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bridle"))
        .args(args)
        .env_remove("BRIDLE_DB")
        .output()
        .unwrap()
}

async fn a_queue_with_a_dead_job(path: &Path) {
    let settings = QueueSettings {
        max_receives: 1,
        ..QueueSettings::default()
    };
    let q = SqliteQueue::open(path, settings).unwrap();
    q.enqueue(&poison()).await.unwrap();
    let got = q.receive(1, Duration::ZERO).await.unwrap();
    q.release(&got[0].receipt).await.unwrap();
    // Its one delivery is spent: the next look moves it to the dead letters.
    assert!(q.receive(1, Duration::ZERO).await.unwrap().is_empty());
    assert_eq!(q.dead_letters().unwrap().len(), 1);
}

/// A WhatsApp message that fails every time.
fn poison() -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "whatsapp".into(),
        message_id: "wamid.poison".into(),
        conversation_key: "491701234567".into(),
        external_user_id: "491701234567".into(),
        text: "Plan my week".into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: 0,
    }
}

#[tokio::test]
async fn dead_jobs_are_listed_and_retried() {
    let dir = tempfile::Builder::new()
        .prefix("bridle-jobs-cli-")
        .tempdir()
        .unwrap();
    let db = dir.path().join("bridle.db");
    let db_arg = db.to_str().unwrap();
    a_queue_with_a_dead_job(&db).await;

    let table = bridle(&["jobs", "dead", "--db", db_arg]);
    assert!(table.status.success(), "{table:?}");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("whatsapp") && text.contains("491701234567"),
        "{text}"
    );

    // Logs go to stderr: stdout is JSON alone, even with traces on (their start is logged)
    // and every log line asked for.
    let json = Command::new(env!("CARGO_BIN_EXE_bridle"))
        .args(["jobs", "dead", "--db", db_arg, "--json"])
        .env_remove("BRIDLE_DB")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert!(!json.stderr.is_empty(), "the logs are on stderr");
    let rows: Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&json.stdout)));
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["message_id"], "wamid.poison");
    let id = rows[0]["id"].as_i64().unwrap();

    let unknown = bridle(&["jobs", "retry", "9999", "--db", db_arg]);
    assert_eq!(unknown.status.code(), Some(1));
    // A queue that cannot be read is the store's exit code (3), not bad input's (1): a script
    // tells "no such job" from "the queue could not be reached".
    let garbage = dir.path().join("garbage.db");
    std::fs::write(
        &garbage,
        "not a database, and long enough to be read as one".repeat(100),
    )
    .unwrap();
    let unreadable = bridle(&["jobs", "dead", "--db", garbage.to_str().unwrap()]);
    assert_eq!(unreadable.status.code(), Some(3), "{unreadable:?}");
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no dead job 9999"));

    let retried = bridle(&["jobs", "retry", &id.to_string(), "--db", db_arg]);
    assert!(retried.status.success(), "{retried:?}");
    let q = SqliteQueue::open(&db, QueueSettings::default()).unwrap();
    assert!(q.dead_letters().unwrap().is_empty());
    let back = q.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!(back.len(), 1, "the job is queued again");
    assert_eq!(back[0].job.message_id, "wamid.poison");
    assert_eq!(back[0].receive_count, 1, "with a fresh receive count");

    let none = bridle(&["jobs", "dead", "--db", db_arg]);
    assert!(String::from_utf8_lossy(&none.stdout).contains("No dead jobs."));
    let missing = bridle(&["jobs", "dead", "--db", "/nonexistent/bridle.db"]);
    assert_eq!(missing.status.code(), Some(1));
}

/// `bridle jobs dead|retry --dlq-url` against moto's SQS (`AWS_ENDPOINT_URL`): a queue whose
/// job was received once too often, so it sits in the dead-letter queue.
#[tokio::test]
async fn on_aws_the_dead_letter_queue_is_listed_and_retried() {
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: this test needs moto (scripts/test starts it)");
    let client = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "test", "test", None, None, "static",
            ))
            .build(),
    );
    let settings = QueueSettings {
        max_receives: 1,
        ..QueueSettings::default()
    };
    let name = format!(
        "bridle-jobs-cli-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    );
    let (queue_url, dlq_url) = queue_sqs::create_fifo_queue_with_dlq(&client, &name, &settings)
        .await
        .unwrap();
    let q = queue_sqs::SqsQueue::new(client.clone(), queue_url.clone(), settings);
    q.enqueue(&poison()).await.unwrap();
    let got = q.receive(1, Duration::ZERO).await.unwrap();
    q.release(&got[0].receipt).await.unwrap();
    assert!(q.receive(1, Duration::ZERO).await.unwrap().is_empty());

    let table = bridle(&["jobs", "dead", "--dlq-url", &dlq_url]);
    assert!(table.status.success(), "{table:?}");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("whatsapp") && text.contains("491701234567"),
        "{text}"
    );
    let json = bridle(&["jobs", "dead", "--dlq-url", &dlq_url, "--json"]);
    let rows: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["message_id"], "wamid.poison");
    let id = rows[0]["id"].as_str().unwrap().to_owned();

    let unknown = bridle(&[
        "jobs",
        "retry",
        "no-such-id",
        "--dlq-url",
        &dlq_url,
        "--queue-url",
        &queue_url,
    ]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no dead job no-such-id"));
    let without_queue = bridle(&["jobs", "retry", &id, "--dlq-url", &dlq_url]);
    assert_eq!(
        without_queue.status.code(),
        Some(2),
        "--queue-url is required"
    );

    let retried = bridle(&[
        "jobs",
        "retry",
        &id,
        "--dlq-url",
        &dlq_url,
        "--queue-url",
        &queue_url,
    ]);
    assert!(retried.status.success(), "{retried:?}");
    assert!(String::from_utf8_lossy(&retried.stdout).contains("queued again"));
    let back = q.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!(back.len(), 1, "the job is queued again");
    assert_eq!(back[0].job.message_id, "wamid.poison");
    let none = bridle(&["jobs", "dead", "--dlq-url", &dlq_url]);
    assert!(String::from_utf8_lossy(&none.stdout).contains("No dead jobs."));
}

/// A dead job this build cannot read (edited by hand) is named as such, not an error that hides
/// the others; retrying them all leaves it where it is.
#[tokio::test]
async fn an_unreadable_dead_job_is_named_and_left() {
    let dir = tempfile::Builder::new()
        .prefix("bridle-jobs-cli-unreadable-")
        .tempdir()
        .unwrap();
    let db = dir.path().join("bridle.db");
    let db_arg = db.to_str().unwrap();
    a_queue_with_a_dead_job(&db).await;
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE queue_dead_letters SET body = 'not json'", [])
        .unwrap();
    let seq: i64 = conn
        .query_row("SELECT seq FROM queue_dead_letters", [], |r| r.get(0))
        .unwrap();
    drop(conn);

    let table = bridle(&["jobs", "dead", "--db", db_arg]);
    assert!(table.status.success(), "{table:?}");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("cannot read") && text.contains(&seq.to_string()),
        "{text}"
    );
    let json = bridle(&["jobs", "dead", "--db", db_arg, "--json"]);
    let rows: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows, serde_json::json!([{"id": seq, "unreadable": true}]));
    let all = bridle(&["jobs", "retry", "--all", "--db", db_arg]);
    assert!(all.status.success(), "{all:?}");
    assert!(String::from_utf8_lossy(&all.stdout).contains("0 job(s)"));
    let q = SqliteQueue::open(&db, QueueSettings::default()).unwrap();
    assert_eq!(q.unreadable_dead_letters().unwrap(), [seq]);
}
