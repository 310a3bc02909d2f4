//! The real `bridle serve` binary as a child process on a free port, for the tests that signal,
//! kill and restart it: start it on a data directory with the scripted model, read its address,
//! and talk to its web chat API. Included with `#[path]` by `signals.rs`, `kill_during_tool.rs`
//! and `kill_after_ack.rs`.

#![allow(dead_code)] // each test file uses its own part of this

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A running `bridle serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The server's output lines (stdout and stderr), as they come; also echoed to the test's
    /// stderr.
    pub log: mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh, empty directory for one test's database and script, removed when dropped (pass or
/// fail). Bind it before the servers that use it, so they are killed before it goes.
pub fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("bridle-{name}-"))
        .tempdir()
        .unwrap()
}

/// Start `bridle serve` on a free port with its database in `dir`, the scripted model playing
/// `dir/script.json`, and only the settings `configure` adds; wait for its address.
pub fn start(dir: &Path, configure: impl FnOnce(&mut Command)) -> Server {
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
    configure(&mut command);
    let mut child = command.spawn().expect("the bridle binary starts");
    let (tx, log) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let to_log = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[bridle] {line}");
            let _ = to_log.send(line);
        }
    });
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
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            eprintln!("[bridle] {line}");
            let _ = tx.send(line);
        }
    });
    Server { child, base, log }
}

/// A new web chat conversation; its id.
pub async fn new_conversation(http: &reqwest::Client, base: &str) -> String {
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

/// The conversation's visible messages, oldest first, as text.
pub async fn history(http: &reqwest::Client, base: &str, conv: &str) -> Vec<String> {
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

/// Post `text` to the conversation; the response, whatever its status.
pub async fn send_message(
    http: &reqwest::Client,
    base: &str,
    conv: &str,
    text: &str,
) -> reqwest::Response {
    http.post(format!("{base}/api/conversations/{conv}/messages"))
        .json(&serde_json::json!({ "text": text }))
        .send()
        .await
        .unwrap()
}

/// The conversation's visible messages once there are at least `n`, or as they are after
/// `within`.
pub async fn history_of_at_least(
    http: &reqwest::Client,
    base: &str,
    conv: &str,
    n: usize,
    within: Duration,
) -> Vec<String> {
    let until = std::time::Instant::now() + within;
    loop {
        let seen = history(http, base, conv).await;
        if seen.len() >= n || std::time::Instant::now() >= until {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
