//! An acknowledged message survives `kill -9` (issue 18, point 1): once the web chat's stream
//! has said `queued`, the message is durable — the real `bridle serve` binary is killed with
//! SIGKILL right after the acknowledgement, restarted on the same database file, and the
//! message is there and answered. Two messages: one whose turn had started (the model stalls) and
//! one still waiting behind it in the same conversation.

#[path = "support/serve.rs"]
mod serve;

use serve::{Server, history_of_at_least, new_conversation};
use std::path::Path;
use std::time::Duration;

/// Before the kill: the model never answers, so the first turn is running and the second waits.
const STALLS: &str = r#"{"replies": [{"steps": [{"say": "Let me"}, {"stall": true}]}]}"#;

/// After the restart: every call is answered.
const ANSWERS: &str = r#"{"repeat": true, "replies": [
  {"steps": [{"say": "Answered after the restart."}, {"stop": "end_turn"}]}
]}"#;

/// Start `bridle serve` on `dir` playing `script`.
fn start(dir: &Path, script: &str) -> Server {
    std::fs::write(dir.join("script.json"), script).unwrap();
    serve::start(dir, |_| {})
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_acknowledged_as_queued_survive_kill_9_and_are_answered_after_the_restart() {
    let dir = serve::temp_dir("kill-ack");
    let http = reqwest::Client::new();
    let mut server = start(dir.path(), STALLS);
    let conv = new_conversation(&http, &server.base).await;
    let first = post_until_queued(&http, &server.base, &conv, "first question").await;
    let second = post_until_queued(&http, &server.base, &conv, "second question").await;
    // SIGKILL the moment the second acknowledgement arrived: no drain, no flush, nothing.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop((first, second));

    let restarted = start(dir.path(), ANSWERS);
    let seen = history_of_at_least(&http, &restarted.base, &conv, 4, Duration::from_secs(30)).await;
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
}
