//! `kill -9` of the real `bridle serve` binary in the middle of a tool call, then a restart on
//! the same database (DESIGN invariant 10; issue 15, point 1): the user's note is saved once and
//! one reply is recorded, whether the process died just before the note was written or just
//! after (the note and the call's receipt committed, the call's result not yet recorded).
//!
//! The kill lands at exactly that point through the runner's crash-test pause
//! (`BRIDLE_FAULT_PAUSE_TOOL`, see `tools::FAULT_PAUSE_VAR`): the server logs
//! `tools::PAUSED` and stops there until it is killed.

#[path = "support/serve.rs"]
mod serve;

use serve::{Server, history_of_at_least, new_conversation};
use std::path::Path;
use std::time::{Duration, Instant};

/// Before the kill: the model asks to save a note.
const ASKS_FOR_A_NOTE: &str = r#"{"replies": [
  {"steps": [{"call": {"id": "toolu_1", "name": "add_note", "input": {"text": "buy milk"}}}, {"stop": "tool_use"}]}
]}"#;

/// After the restart: the resumed turn's next model call closes it.
const CLOSES: &str = r#"{"replies": [
  {"steps": [{"say": "Saved: buy milk."}, {"stop": "end_turn"}]}
]}"#;

/// Wait for the server to log the crash-test pause.
fn temp_dir(name: &str) -> tempfile::TempDir {
    serve::temp_dir(&format!("kill-{name}"))
}

/// Start `bridle serve` on `dir` playing `script`. `pause` asks the tool runner to stop for
/// good at that point.
fn start(dir: &Path, script: &str, pause: Option<&str>) -> Server {
    std::fs::write(dir.join("script.json"), script).unwrap();
    serve::start(dir, |c| {
        if let Some(at) = pause {
            c.env(tools::FAULT_PAUSE_VAR, at);
        }
    })
}

fn wait_for_pause(server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match server.log.recv_timeout(left) {
            Ok(line) if line.contains(tools::PAUSED) => return,
            Ok(_) => {}
            Err(_) => panic!("the tool call never reached the pause"),
        }
    }
}

fn notes_in(dir: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(dir.join("bridle.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT text FROM demo_notes ORDER BY id")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Kill the server at `pause` during the note's tool call, restart it, and check the outcome.
async fn killed_at(pause: &str) {
    let dir = temp_dir(pause);
    let http = reqwest::Client::new();
    let mut server = start(dir.path(), ASKS_FOR_A_NOTE, Some(pause));
    let conv = new_conversation(&http, &server.base).await;
    // The stream stays open while the turn runs; the post only has to be accepted.
    let posted = http
        .post(format!("{}/api/conversations/{conv}/messages", server.base))
        .json(&serde_json::json!({ "text": "remember to buy milk" }))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);
    wait_for_pause(&server);
    server.child.kill().unwrap(); // SIGKILL: no drain, no release, nothing.
    server.child.wait().unwrap();
    drop(posted);
    let before_restart = notes_in(dir.path());

    let restarted = start(dir.path(), CLOSES, None);
    let seen = history_of_at_least(&http, &restarted.base, &conv, 2, Duration::from_secs(30)).await;
    assert_eq!(
        seen,
        ["remember to buy milk", "Saved: buy milk."],
        "killed {pause}: one reply, recorded once"
    );
    assert_eq!(
        notes_in(dir.path()),
        ["buy milk"],
        "killed {pause}: the note is saved exactly once (before the restart: {before_restart:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_note_was_saved_the_restart_saves_it_no_second_time() {
    killed_at("after_call").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_before_the_note_was_saved_the_restart_saves_it_once() {
    killed_at("before_call").await;
}

/// Before the kill: save a note and delete it in one answer; the delete needs a yes, and on the
/// user's yes the model deletes again (that call is where it stops).
const SAVES_THEN_DELETES: &str = r#"{"replies": [
  {"steps": [
    {"call": {"id": "toolu_1", "name": "add_note", "input": {"text": "buy milk"}}},
    {"call": {"id": "toolu_2", "name": "delete_note", "input": {"id": 1}}},
    {"stop": "tool_use"}]},
  {"steps": [{"say": "Delete it?"}, {"stop": "end_turn"}]},
  {"steps": [
    {"call": {"id": "toolu_3", "name": "delete_note", "input": {"id": 1}}},
    {"stop": "tool_use"}]}
]}"#;

/// After the restart: the resumed turn's next model call closes it.
const DELETED: &str = r#"{"replies": [
  {"steps": [{"say": "Deleted it again."}, {"stop": "end_turn"}]}
]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_a_note_was_deleted_the_model_still_sees_the_delete_succeed() {
    let dir = temp_dir("delete");
    let http = reqwest::Client::new();
    let mut server = start(
        dir.path(),
        SAVES_THEN_DELETES,
        Some("after_call:delete_note"),
    );
    let conv = new_conversation(&http, &server.base).await;
    let say = |text: &'static str| {
        http.post(format!("{}/api/conversations/{conv}/messages", server.base))
            .json(&serde_json::json!({ "text": text }))
            .send()
    };
    let asked = say("save and drop a note").await.unwrap();
    assert_eq!(asked.status(), 200);
    let seen = history_of_at_least(&http, &server.base, &conv, 2, Duration::from_secs(30)).await;
    assert!(seen[1].starts_with("Delete it?"), "{seen:?}");
    assert_eq!(
        notes_in(dir.path()),
        ["buy milk"],
        "held until the user's yes"
    );
    drop(asked);
    let posted = say("yes").await.unwrap();
    assert_eq!(posted.status(), 200);
    wait_for_pause(&server);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(posted);

    let restarted = start(dir.path(), DELETED, None);
    let seen = history_of_at_least(&http, &restarted.base, &conv, 4, Duration::from_secs(30)).await;
    assert_eq!(seen[2..], ["yes", "Deleted it again."]);
    assert!(notes_in(dir.path()).is_empty());
    // What the model was told about the delete is what the uninterrupted run told it: the
    // resumed turn answered from the receipt instead of deleting again ("There is no note").
    let told: String = rusqlite::Connection::open(dir.path().join("bridle.db"))
        .unwrap()
        .query_row(
            "SELECT body FROM tool_results WHERE tool_use_id = 'toolu_3'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        told.contains(r#""content":{"deleted":1},"is_error":false"#),
        "{told}"
    );
}
