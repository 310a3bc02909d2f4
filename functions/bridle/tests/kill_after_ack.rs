//! An acknowledged message survives `kill -9` (issue 18, point 1): once the web chat's stream
//! has said `queued`, the message is durable — the real `bridle serve` binary is killed with
//! SIGKILL right after the acknowledgement, restarted on the same database file, and the
//! message is there and answered. Two messages: one whose turn had started (the model stalls) and
//! one still waiting behind it in the same conversation.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Before the kill: the model never answers, so the first turn is running and the second waits.
const STALLS: &str = r#"{"replies": [{"steps": [{"say": "Let me"}, {"stall": true}]}]}"#;

/// After the restart: every call is answered.
const ANSWERS: &str = r#"{"repeat": true, "replies": [
  {"steps": [{"say": "Answered after the restart."}, {"stop": "end_turn"}]}
]}"#;

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bridle-kill-ack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Start `bridle serve` on a free port with its data in `dir` playing `script`, and wait for its
/// address.
fn start(dir: &Path, script: &str) -> Server {
    std::fs::write(dir.join("script.json"), script).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bridle"))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BRIDLE_ADDR", "127.0.0.1:0")
        .env("BRIDLE_DB", dir.join("bridle.db"))
        .env("BRIDLE_BACKEND", "scripted")
        .env("BRIDLE_SCRIPT", dir.join("script.json"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the bridle binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
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
    std::thread::spawn(move || for _ in lines {});
    Server { child, base }
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

/// Post `text` and read its stream until the `queued` acknowledgement; the open stream.
async fn post_until_queued(
    http: &reqwest::Client,
    base: &str,
    conv: &str,
    text: &str,
) -> reqwest::Response {
    let mut res = http
        .post(format!("{base}/api/conversations/{conv}/messages"))
        .json(&serde_json::json!({ "text": text }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let mut seen = String::new();
    while let Some(chunk) = res.chunk().await.unwrap() {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if seen.contains("event: queued") {
            return res;
        }
    }
    panic!("the stream ended before `queued`: {seen}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_acknowledged_as_queued_survive_kill_9_and_are_answered_after_the_restart() {
    let dir = temp_dir();
    let http = reqwest::Client::new();
    let mut server = start(&dir, STALLS);
    let conv = new_conversation(&http, &server.base).await;
    let first = post_until_queued(&http, &server.base, &conv, "first question").await;
    let second = post_until_queued(&http, &server.base, &conv, "second question").await;
    // SIGKILL the moment the second acknowledgement arrived: no drain, no flush, nothing.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop((first, second));

    let restarted = start(&dir, ANSWERS);
    let mut seen = Vec::new();
    for _ in 0..300 {
        seen = history(&http, &restarted.base, &conv).await;
        if seen.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen,
        [
            "first question",
            "Answered after the restart.",
            "second question",
            "Answered after the restart.",
        ],
        "both acknowledged messages were kept and answered, in order"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
