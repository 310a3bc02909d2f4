//! Stopping the real `bridle serve` binary the way service managers do: SIGTERM (systemd,
//! Docker, Kubernetes) and SIGINT (Ctrl-C) drain — running turns finish and stream to the end, a
//! queued message's stream is told it will be answered after the restart (and it is), a
//! half-sent request does not hold the exit past the grace period — and the process exits 0.
//! A turn still running when the grace period ends is cut short: its lease and claim are
//! released and its job put back, so the next start answers it at once.

#[path = "support/serve.rs"]
mod serve;

use serve::{Server, history, new_conversation};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Eight words at 120 ms each: a turn that is still streaming when the signal comes.
const SCRIPT: &str = r#"{"repeat": true, "replies": [
  {"token_delay_ms": 120, "steps": [{"say": "one two three four five six seven eight."}, {"stop": "end_turn"}]}
]}"#;

fn signal(server: &Server, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(server.child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Wait for the process to end, at most `limit`; its exit code and how long it took.
fn exit_within(server: &mut Server, limit: Duration) -> (Option<i32>, Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            return (status.code(), started.elapsed());
        }
        assert!(
            started.elapsed() < limit,
            "the server did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn temp_dir(name: &str) -> tempfile::TempDir {
    let dir = serve::temp_dir(&format!("signals-{name}"));
    std::fs::write(dir.path().join("script.json"), SCRIPT).unwrap();
    dir
}

/// Start `bridle serve` on `dir` with a shutdown grace period of `grace_s` seconds.
fn start(dir: &Path, grace_s: u64) -> Server {
    serve::start(dir, |c| {
        c.env("BRIDLE_SHUTDOWN_GRACE_S", grace_s.to_string());
    })
}

async fn post(http: &reqwest::Client, base: &str, conv: &str, text: &str) -> reqwest::Response {
    let res = serve::send_message(http, base, conv, text).await;
    assert_eq!(res.status(), 200);
    res
}

/// Read an SSE response until `stop` says so (or it ends); the whole text read.
async fn read_until(res: &mut reqwest::Response, stop: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    while let Some(chunk) = res.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
        if stop(&text) {
            break;
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_running_turn_and_a_queued_message_is_answered_after_restart() {
    let dir = temp_dir("term");
    let mut server = start(dir.path(), 10);
    let http = reqwest::Client::new();
    let conv = new_conversation(&http, &server.base).await;
    let mut running = post(&http, &server.base, &conv, "first").await;
    read_until(&mut running, |t| t.contains("event: token")).await;
    // Queued behind the running turn (one turn at a time per conversation).
    let mut queued = post(&http, &server.base, &conv, "second").await;
    read_until(&mut queued, |t| t.contains("event: queued")).await;

    signal(&server, "TERM");
    let rest = read_until(&mut running, |t| t.contains("event: done")).await;
    assert!(
        rest.contains("\"end\":\"answered\""),
        "the running turn finished: {rest}"
    );
    let told = read_until(&mut queued, |t| t.contains("event: done")).await;
    assert!(
        told.contains("\"end\":\"interrupted\"") && told.contains("restarting"),
        "the waiting stream was told: {told}"
    );
    let (code, took) = exit_within(&mut server, Duration::from_secs(15));
    assert_eq!(code, Some(0), "a drained stop exits 0");
    assert!(
        took < Duration::from_secs(10),
        "within the grace period: {took:?}"
    );
    // Restarted on the same database: the queued message is answered, nothing twice.
    let restarted = start(dir.path(), 10);
    let mut answered = Vec::new();
    for _ in 0..100 {
        answered = history(&http, &restarted.base, &conv).await;
        if answered.len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        answered,
        [
            "first",
            "one two three four five six seven eight.",
            "second",
            "one two three four five six seven eight."
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_with_a_half_sent_body_exits_0_within_the_grace_period() {
    let dir = temp_dir("int");
    let mut server = start(dir.path(), 2);
    let http = reqwest::Client::new();
    let conv = new_conversation(&http, &server.base).await;
    let host = server.base.trim_start_matches("http://").to_owned();
    let mut half = std::net::TcpStream::connect(&host).unwrap();
    write!(
        half,
        "POST /api/conversations/{conv}/messages HTTP/1.1\r\nHost: {host}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"te"
    )
    .unwrap();
    half.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));

    signal(&server, "INT");
    let (code, took) = exit_within(&mut server, Duration::from_secs(8));
    assert_eq!(code, Some(0));
    assert!(
        took < Duration::from_secs(4),
        "the half-sent body did not hold the exit past the 2 s grace period: {took:?}"
    );
    // Nothing half-received was stored.
    let restarted = start(dir.path(), 2);
    assert!(history(&http, &restarted.base, &conv).await.is_empty());
}

/// A turn whose model answers a word and then never again.
const STUCK: &str = r#"{"replies": [{"steps": [{"say": "Thinking"}, {"stall": true}]}]}"#;

/// A model that answers at once.
const QUICK: &str =
    r#"{"repeat": true, "replies": [{"steps": [{"say": "Back now."}, {"stop": "end_turn"}]}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_past_the_grace_period_cuts_a_stuck_turn_short_and_the_restart_answers_it_at_once() {
    let dir = temp_dir("stuck");
    std::fs::write(dir.path().join("script.json"), STUCK).unwrap();
    let mut server = start(dir.path(), 2);
    let http = reqwest::Client::new();
    let conv = new_conversation(&http, &server.base).await;
    let mut stuck = post(&http, &server.base, &conv, "first").await;
    read_until(&mut stuck, |t| t.contains("event: token")).await;

    signal(&server, "INT");
    let told = read_until(&mut stuck, |t| t.contains("event: done")).await;
    assert!(
        told.contains("\"end\":\"interrupted\"") && told.contains("restarting"),
        "the open stream was told: {told}"
    );
    let (code, took) = exit_within(&mut server, Duration::from_secs(10));
    assert_eq!(code, Some(0), "a stop past the grace period still exits 0");
    assert!(
        took < Duration::from_secs(5),
        "within the 2 s grace period and the cut's few writes: {took:?}"
    );

    // Restarted: the conversation's lease (60 s) and the job's claim (the job's budget) were
    // released and the job put back, so the turn resumes at once.
    std::fs::write(dir.path().join("script.json"), QUICK).unwrap();
    let restarted = start(dir.path(), 2);
    let started = Instant::now();
    let mut answered = Vec::new();
    while started.elapsed() < Duration::from_secs(5) {
        answered = history(&http, &restarted.base, &conv).await;
        if answered.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        answered,
        ["first", "Back now."],
        "after {:?}",
        started.elapsed()
    );
}

#[test]
fn without_sign_in_a_non_loopback_address_is_refused_at_start() {
    let dir = temp_dir("addr");
    let out = Command::new(env!("CARGO_BIN_EXE_bridle"))
        .arg("serve")
        .env_clear()
        .env("BRIDLE_ADDR", "0.0.0.0:0")
        .env("BRIDLE_DB", dir.path().join("bridle.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a configuration error");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("not a loopback address") && said.contains("BRIDLE_OIDC_ISSUER"),
        "{said}"
    );
    assert!(
        !dir.path().join("bridle.db").exists(),
        "nothing was started or written"
    );
}

/// A second `bridle serve` on the database of a running one is refused at start, with a
/// sentence (it would take the first one's jobs in flight for a dead process's and run them
/// again); the first goes on; once it is gone (here killed), a new one starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_a_running_ones_database_is_refused() {
    let dir = temp_dir("twice");
    let mut first = start(dir.path(), 5);
    let second = Command::new(env!("CARGO_BIN_EXE_bridle"))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BRIDLE_ADDR", "127.0.0.1:0")
        .env("BRIDLE_DB", dir.path().join("bridle.db"))
        .env("BRIDLE_BACKEND", "scripted")
        .env("BRIDLE_SCRIPT", dir.path().join("script.json"))
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(
        said.contains("another bridle serve is running on"),
        "{said}"
    );
    let http = reqwest::Client::new();
    let health = http
        .get(format!("{}/healthz", first.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "the first one goes on");
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let third = start(dir.path(), 5);
    let health = http
        .get(format!("{}/healthz", third.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "free once its holder is gone");
}

/// A start that cannot listen (the port is taken) says so and changes nothing in the database:
/// the port is bound before the database is opened (opening it would release a dead server's
/// claims and make its jobs visible again, for a server that is not coming).
#[test]
fn a_start_that_cannot_listen_writes_nothing() {
    let dir = temp_dir("port-taken");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bridle"))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BRIDLE_ADDR", addr.to_string())
        .env("BRIDLE_DB", dir.path().join("bridle.db"))
        .env("BRIDLE_BACKEND", "scripted")
        .env("BRIDLE_SCRIPT", dir.path().join("script.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("cannot listen on {addr}")), "{said}");
    assert!(
        !dir.path().join("bridle.db").exists(),
        "the database was not opened"
    );
}
