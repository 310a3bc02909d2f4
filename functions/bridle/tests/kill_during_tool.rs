//! `kill -9` of the real `bridle serve` binary in the middle of a tool call, then a restart on
//! the same database (DESIGN invariant 10; issue 15, point 1): the user's note is saved once and
//! one reply is recorded, whether the process died just before the note was written or just
//! after (the note and the call's receipt committed, the call's result not yet recorded).
//!
//! The kill lands at exactly that point through the runner's crash-test pause
//! (`BRIDLE_FAULT_PAUSE_TOOL`, see `tools::FAULT_PAUSE_VAR`): the server logs
//! `tools::PAUSED` and stops there until it is killed.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Before the kill: the model asks to save a note.
const ASKS_FOR_A_NOTE: &str = r#"{"replies": [
  {"steps": [{"call": {"id": "toolu_1", "name": "add_note", "input": {"text": "buy milk"}}}, {"stop": "tool_use"}]}
]}"#;

/// After the restart: the resumed turn's next model call closes it.
const CLOSES: &str = r#"{"replies": [
  {"steps": [{"say": "Saved: buy milk."}, {"stop": "end_turn"}]}
]}"#;

struct Server {
    child: Child,
    base: String,
    /// The server's log lines (stderr), as they come.
    log: mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bridle-kill-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Start `bridle serve` on a free port with its data in `dir` and `script`, and wait for its
/// address. `pause` asks the tool runner to stop for good at that point.
fn start(dir: &Path, script: &str, pause: Option<&str>) -> Server {
    std::fs::write(dir.join("script.json"), script).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_bridle"));
    command
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BRIDLE_ADDR", "127.0.0.1:0")
        .env("BRIDLE_DB", dir.join("bridle.db"))
        .env("BRIDLE_BACKEND", "scripted")
        .env("BRIDLE_SCRIPT", dir.join("script.json"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(at) = pause {
        command.env(tools::FAULT_PAUSE_VAR, at);
    }
    let mut child = command.spawn().expect("the bridle binary starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, log) = mpsc::channel();
    let to_log = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[bridle] {line}");
            let _ = to_log.send(line);
        }
    });
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = lines
        .next()
        .expect("the server says where it listens")
        .unwrap();
    let base = line
        .split("Open ")
        .nth(1)
        .and_then(|rest| rest.split('/').nth(2))
        .map(|host| format!("http://{host}"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            eprintln!("[bridle] {line}");
            let _ = tx.send(line);
        }
    });
    Server { child, base, log }
}

/// Wait for the server to log the crash-test pause.
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

async fn new_conversation(http: &reqwest::Client, base: &str) -> String {
    let res = http
        .post(format!("{base}/api/conversations"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn history(http: &reqwest::Client, base: &str, conv: &str) -> Vec<String> {
    let v: Value = http
        .get(format!("{base}/api/conversations/{conv}/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect()
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
    let mut server = start(&dir, ASKS_FOR_A_NOTE, Some(pause));
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
    let before_restart = notes_in(&dir);

    let restarted = start(&dir, CLOSES, None);
    let mut seen = Vec::new();
    for _ in 0..300 {
        seen = history(&http, &restarted.base, &conv).await;
        if seen.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen,
        ["remember to buy milk", "Saved: buy milk."],
        "killed {pause}: one reply, recorded once"
    );
    assert_eq!(
        notes_in(&dir),
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

/// Before the kill: save a note and delete it in one answer (the delete is where it stops).
const SAVES_THEN_DELETES: &str = r#"{"replies": [
  {"steps": [
    {"call": {"id": "toolu_1", "name": "add_note", "input": {"text": "buy milk"}}},
    {"call": {"id": "toolu_2", "name": "delete_note", "input": {"id": 1}}},
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
    let mut server = start(&dir, SAVES_THEN_DELETES, Some("after_call:delete_note"));
    let conv = new_conversation(&http, &server.base).await;
    let posted = http
        .post(format!("{}/api/conversations/{conv}/messages", server.base))
        .json(&serde_json::json!({ "text": "save and drop a note" }))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);
    wait_for_pause(&server);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(posted);

    let restarted = start(&dir, DELETED, None);
    let mut seen = Vec::new();
    for _ in 0..300 {
        seen = history(&http, &restarted.base, &conv).await;
        if seen.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen, ["save and drop a note", "Deleted it again."]);
    assert!(notes_in(&dir).is_empty());
    // What the model was told about the delete is what the uninterrupted run told it: the
    // resumed turn answered from the receipt instead of deleting again ("There is no note").
    let results: Vec<String> = {
        let conn = rusqlite::Connection::open(dir.join("bridle.db")).unwrap();
        let mut stmt = conn
            .prepare("SELECT body FROM tool_results ORDER BY tool_use_id")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[1].contains(r#""content":{"deleted":1},"is_error":false"#),
        "{results:?}"
    );
}
