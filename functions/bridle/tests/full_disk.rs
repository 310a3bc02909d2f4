//! A full disk is an ordinary day: the real `bridle serve` binary with its database on a small
//! tmpfs of its own, filled to the last byte by the test while the server is idle and again in
//! the middle of a turn, then freed. A message sent while the disk is full gets a clear error and
//! nothing is acknowledged; the operator's log names the cause; a turn cut off by the full disk
//! is answered once the disk has room again, exactly once, and the conversation goes on at once
//! (it is not held for the queue's 15-minute visibility timeout).
//!
//! Mounting a tmpfs needs root (CAP_SYS_ADMIN), which this machine and CI have.

#[path = "support/serve.rs"]
mod serve;

use serve::{Server, history, history_of_at_least, new_conversation};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Every call: a few words, a pause (the test fills the disk during it), the rest.
const SCRIPT: &str = r#"{"repeat": true, "replies": [
  {"steps": [{"say": "Working on it."}, {"wait_ms": 1500}, {"say": " Done."}, {"stop": "end_turn"}]}
]}"#;

/// A tmpfs of `size` mounted on a fresh folder, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Self {
        let dir = serve::temp_dir("full-disk");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mounting a tmpfs needs root (CAP_SYS_ADMIN): run this test as root"
        );
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fill the file system under `dir` to the last byte; the filler's path.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 16 * 1024];
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling the disk: {e}"),
        }
    }
    // The last partial pages too.
    while file.write(&[0u8]).is_ok_and(|n| n == 1) {}
    path
}

/// Post `text`; the status and the whole body (the event stream, or the JSON error).
async fn post(http: &reqwest::Client, base: &str, conv: &str, text: &str) -> (u16, String) {
    let res = serve::send_message(http, base, conv, text).await;
    let status = res.status().as_u16();
    (status, res.text().await.unwrap())
}

/// Post a message whose turn pauses, and fill the disk during the pause (once its first words
/// have streamed: the turn has started and its user message is stored); the post's outcome
/// and the filler.
async fn fill_mid_turn(
    http: &reqwest::Client,
    base: &str,
    conv: &str,
    disk: &Path,
) -> (tokio::task::JoinHandle<(u16, String)>, PathBuf) {
    let (started, has_started) = tokio::sync::oneshot::channel();
    let during = {
        let (http, base, conv) = (http.clone(), base.to_owned(), conv.to_owned());
        tokio::spawn(async move {
            let mut res =
                serve::send_message(&http, &base, &conv, "sent before the disk filled").await;
            let status = res.status().as_u16();
            let mut started = Some(started);
            let mut seen = String::new();
            while let Some(chunk) = res.chunk().await.unwrap() {
                seen.push_str(&String::from_utf8_lossy(&chunk));
                if seen.contains("event: token")
                    && let Some(started) = started.take()
                {
                    let _ = started.send(());
                }
            }
            (status, seen)
        })
    };
    has_started
        .await
        .expect("the turn streamed its first words");
    (during, fill(disk))
}

/// Every line the server logged so far.
fn logged(server: &Server, into: &mut Vec<String>) {
    into.extend(server.log.try_iter());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_new_messages_clearly_and_a_cut_off_turn_is_answered_once_it_has_room()
{
    let disk = Tmpfs::mount("4m");
    std::fs::write(disk.path().join("script.json"), SCRIPT).unwrap();
    let server = serve::start(disk.path(), |c| {
        c.env("RUST_LOG", "warn,channel_jobs=info");
    });
    let http = reqwest::Client::new();
    let base = server.base.clone();
    let conv = new_conversation(&http, &base).await;
    let mut log = Vec::new();

    // Full while idle: the message is refused, with a sentence, and nothing is queued.
    let filler = fill(disk.path());
    let (status, body) = post(&http, &base, &conv, "sent while the disk is full").await;
    assert_eq!(status, 500, "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        error["error"], "Something went wrong on our side; please try again.",
        "a calm sentence, no internals: {body}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    logged(&server, &mut log);
    assert!(
        log.iter().any(|l| l.contains("database or disk is full")),
        "the operator's log names the cause: {log:#?}"
    );
    std::fs::remove_file(&filler).unwrap();
    assert!(
        history(&http, &base, &conv).await.is_empty(),
        "the refused message was not kept"
    );

    // Full in the middle of a turn: the answer cannot be stored, and the disk has room again
    // two seconds later; the browser is told the turn did not finish.
    let (during, filler) = fill_mid_turn(&http, &base, &conv, disk.path()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    let (status, stream) = during.await.unwrap();
    assert_eq!(status, 200);
    assert!(stream.contains("event: queued"), "{stream}");
    // It is not asked to send it again (the retry answers it): the page looks for the answer.
    assert!(
        stream.contains("event: error")
            && stream.contains(engine::lines::RETRYING)
            && stream.contains("\"end\":\"retrying\""),
        "the browser is told the turn is being tried again: {stream}"
    );

    // The job is released once the disk has room, and its retry answers it.
    let seen = history_of_at_least(&http, &base, &conv, 2, Duration::from_secs(30)).await;
    assert_eq!(
        seen,
        ["sent before the disk filled", "Working on it. Done."],
        "answered once the disk had room (after {:?})",
        freed.elapsed()
    );
    logged(&server, &mut log);
    assert!(
        log.iter()
            .any(|l| l.contains("settled once the storage was back")),
        "the release was tried again until the disk had room: {log:#?}"
    );

    // The conversation goes on at once, and the cut-off turn was answered exactly once.
    let (status, stream) = post(&http, &base, &conv, "and now?").await;
    assert_eq!(status, 200);
    assert!(stream.contains("event: done"), "{stream}");
    assert!(!stream.contains("event: error"), "{stream}");
    assert_eq!(
        history(&http, &base, &conv).await,
        [
            "sent before the disk filled",
            "Working on it. Done.",
            "and now?",
            "Working on it. Done.",
        ]
    );
    drop(server);
}

/// A disk that stays full for longer than the attempt's settling waits: its claim is left to
/// expire, so the job is left in flight rather than sent round to find its own claim busy until
/// the dead letters. Freed, and the server restarted (which releases the claims of the jobs its
/// queue found in flight), the turn is answered at once, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cut_off_by_a_disk_that_stays_full_is_not_given_up_and_is_answered_after_a_restart()
{
    let disk = Tmpfs::mount("4m");
    std::fs::write(disk.path().join("script.json"), SCRIPT).unwrap();
    let server = serve::start(disk.path(), |_| {});
    let http = reqwest::Client::new();
    let conv = new_conversation(&http, &server.base).await;
    let (during, filler) = fill_mid_turn(&http, &server.base, &conv, disk.path()).await;
    // The lease's and the claim's releases each give up after their window, then the browser
    // is told.
    let (status, stream) = tokio::time::timeout(Duration::from_secs(60), during)
        .await
        .expect("the browser is told within the settling windows")
        .unwrap();
    assert_eq!(status, 200);
    assert!(stream.contains("event: error"), "{stream}");
    std::fs::remove_file(&filler).unwrap();
    // Several backoffs' worth: a job sent round would have met its busy claim by now.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let mut log = Vec::new();
    logged(&server, &mut log);
    assert!(
        log.iter().any(|l| l.contains("its claim is still held")),
        "{log:#?}"
    );
    assert!(
        !log.iter()
            .any(|l| l.contains("dead letters") || l.contains("another worker holds")),
        "the job was not sent round to its own claim: {log:#?}"
    );
    assert_eq!(
        history(&http, &server.base, &conv).await,
        ["sent before the disk filled"],
        "not answered yet, and not given up"
    );
    drop(server);

    let restarted = serve::start(disk.path(), |_| {});
    let seen = history_of_at_least(&http, &restarted.base, &conv, 2, Duration::from_secs(30)).await;
    assert_eq!(
        seen,
        ["sent before the disk filled", "Working on it. Done."]
    );
}
