//! `bridle jobs dead` and `bridle jobs retry` on the built binary, on a queue file with a dead
//! job in it.

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
    let job = TurnJob {
        channel: "whatsapp".into(),
        message_id: "wamid.poison".into(),
        conversation_key: "491701234567".into(),
        external_user_id: "491701234567".into(),
        text: "Plan my week".into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: 0,
    };
    q.enqueue(&job).await.unwrap();
    let got = q.receive(1, Duration::ZERO).await.unwrap();
    q.release(&got[0].receipt).await.unwrap();
    // Its one delivery is spent: the next look moves it to the dead letters.
    assert!(q.receive(1, Duration::ZERO).await.unwrap().is_empty());
    assert_eq!(q.dead_letters().unwrap().len(), 1);
}

#[tokio::test]
async fn dead_jobs_are_listed_and_retried() {
    let dir = std::env::temp_dir().join(format!("bridle-jobs-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("bridle.db");
    let db_arg = db.to_str().unwrap();
    a_queue_with_a_dead_job(&db).await;

    let table = bridle(&["jobs", "dead", "--db", db_arg]);
    assert!(table.status.success(), "{table:?}");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("whatsapp") && text.contains("491701234567"),
        "{text}"
    );

    let json = bridle(&["jobs", "dead", "--db", db_arg, "--json"]);
    let rows: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["message_id"], "wamid.poison");
    let id = rows[0]["id"].as_i64().unwrap();

    let unknown = bridle(&["jobs", "retry", "9999", "--db", db_arg]);
    assert_eq!(unknown.status.code(), Some(1));
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
