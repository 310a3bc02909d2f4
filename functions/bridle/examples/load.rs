//! The load benchmark: the optimised `bridle serve` on a file database with the scripted model (no
//! delays), driven through its real HTTP API by 1, 8 and 64 concurrent conversations. Reports
//! turns/s, p50/p99 time to first token and to `done`, the CPU time per turn of the server and
//! of this driver (they share the machine's cores), and the server's RSS at start and after
//! all turns (10,000 by default), with the machine's load average beside each figure.
//!
//! Run it with `scripts/load-bench` (it builds the binary and this example with the `serve`
//! profile first).
//! `load [TOTAL_TURNS] [ROUNDS]` (10,000 turns in 2 rounds of the three phases by default);
//! `BRIDLE_BIN` points at another `bridle` binary; `TOKIO_WORKER_THREADS` and
//! `BRIDLE_MAX_CONCURRENT_TURNS`, when set, are passed to the server.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Turns in one conversation before its driver starts a new one, so a turn's cost does not
/// depend on how long the run has been going (each turn reads its conversation's history).
const TURNS_PER_CONVERSATION: usize = 50;

/// A short answer with no delays: the harness's own cost per turn is what is measured.
const SCRIPT: &str = r#"{"repeat": true, "replies": [
  {"steps": [{"say": "Hello there."}, {"stop": "end_turn"}]}
]}"#;

struct Server {
    child: Child,
    base: String,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn bridle_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("BRIDLE_BIN") {
        return bin.into();
    }
    // target/serve/examples/load → target/serve/bridle
    let me = std::env::current_exe().expect("the example knows where it is");
    me.parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("bridle"))
        .expect("the example sits under target/<profile>/examples")
}

fn start() -> Server {
    let dir = std::env::temp_dir().join(format!("bridle-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("script.json"), SCRIPT).unwrap();
    let mut child = Command::new(bridle_bin())
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BRIDLE_ADDR", "127.0.0.1:0")
        .env("BRIDLE_DB", dir.join("bridle.db"))
        .env("BRIDLE_BACKEND", "scripted")
        .env("BRIDLE_SCRIPT", dir.join("script.json"))
        .env("RUST_LOG", "warn")
        // The settings a run may vary, passed through.
        .envs(
            ["TOKIO_WORKER_THREADS", "BRIDLE_MAX_CONCURRENT_TURNS"]
                .into_iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k, v))),
        )
        // The budget guards stay on (their ledger writes are part of a turn's cost) with caps
        // no benchmark reaches.
        .env("BRIDLE_CAP_CONVERSATION_MESSAGES_PER_HOUR", "1000000000")
        .env("BRIDLE_CAP_USER_TOKENS_PER_MINUTE", "1000000000000")
        .env("BRIDLE_CAP_USER_TOKENS_PER_HOUR", "1000000000000")
        .env("BRIDLE_CAP_USER_USD_30D", "1000000000")
        .env("BRIDLE_CAP_GLOBAL_USD_30D", "1000000000")
        // The local server's one user stands in for 64 people here: past the default of 8
        // streams per user, the 64-way phase would be refused (429) rather than measured.
        .env("BRIDLE_STREAMS_PER_USER", "64")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the bridle binary starts (build it with cargo build --profile serve -p bridle)");
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
    Server { child, base, dir }
}

fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU time (user + system) the process `pid` (or this one, `"self"`) has used, in ms: the
/// kernel's clock ticks, 100 a second on Linux.
fn cpu_ms(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses: utime and stime
    // are the 12th and 13th of them.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: f64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<f64>().ok())
        .sum();
    ticks * 10.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn new_conversation(http: &reqwest::Client, base: &str) -> String {
    let res = http
        .post(format!("{base}/api/conversations"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "creating a conversation");
    let v: serde_json::Value = res.json().await.unwrap();
    v["id"].as_str().unwrap().to_owned()
}

/// One turn: (time to first token, time to done).
async fn turn(http: &reqwest::Client, base: &str, conv: &str) -> (Duration, Duration) {
    let started = Instant::now();
    let mut res = http
        .post(format!("{base}/api/conversations/{conv}/messages"))
        .json(&serde_json::json!({ "text": "hi" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "posting a message");
    let mut text = String::new();
    let mut first = None;
    while let Some(chunk) = res.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
        if first.is_none() && text.contains("event: token") {
            first = Some(started.elapsed());
        }
        if text.contains("event: done") {
            let done = started.elapsed();
            assert!(
                text.contains("\"end\":\"answered\""),
                "a turn failed: {text}"
            );
            return (first.unwrap_or(done), done);
        }
    }
    panic!("the stream ended before done: {text}");
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// `turns` turns by `conversations` concurrent drivers, each one turn at a time in its
/// conversation (a fresh one every [`TURNS_PER_CONVERSATION`] turns).
async fn phase(http: &reqwest::Client, base: &str, pid: u32, conversations: usize, turns: usize) {
    let per = turns.div_ceil(conversations);
    let (server_cpu, driver_cpu) = (cpu_ms(&pid.to_string()), cpu_ms("self"));
    let base = Arc::<str>::from(base);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conversations {
        let (http, base) = (http.clone(), base.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(per);
            let mut conv = new_conversation(&http, &base).await;
            for n in 0..per {
                if n > 0 && n % TURNS_PER_CONVERSATION == 0 {
                    conv = new_conversation(&http, &base).await;
                }
                out.push(turn(&http, &base, &conv).await);
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let took = started.elapsed();
    let server_cpu = (cpu_ms(&pid.to_string()) - server_cpu) / all.len() as f64;
    let driver_cpu = (cpu_ms("self") - driver_cpu) / all.len() as f64;
    let mut ttft: Vec<_> = all.iter().map(|t| t.0).collect();
    let mut done: Vec<_> = all.iter().map(|t| t.1).collect();
    ttft.sort();
    done.sort();
    println!(
        "{conversations:>3} conversations: {:>5} turns in {:>6.2} s = {:>7.1} turns/s; first token p50 {:.2} ms p99 {:.2} ms; done p50 {:.2} ms p99 {:.2} ms; CPU per turn: server {server_cpu:.2} ms, this driver {driver_cpu:.2} ms (load average {})",
        all.len(),
        took.as_secs_f64(),
        all.len() as f64 / took.as_secs_f64(),
        percentile(&ttft, 0.5),
        percentile(&ttft, 0.99),
        percentile(&done, 0.5),
        percentile(&done, 0.99),
        load_average(),
    );
}

#[tokio::main]
async fn main() {
    let total: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("TOTAL_TURNS is a number"))
        .unwrap_or(10_000);
    let rounds: usize = std::env::args()
        .nth(2)
        .map(|a| a.parse().expect("ROUNDS is a number"))
        .unwrap_or(2)
        .max(1);
    let server = start();
    let pid = server.child.id();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(128)
        // Below the server's keep-alive limit (BRIDLE_HTTP_HEADER_TIMEOUT_S, 10 s): a connection
        // the server is closing is never picked for the next request (on a loaded machine a
        // 64-way turn can leave one idle that long).
        .pool_idle_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    // Warm up: the first turns pay for lazy setup that a long-running server pays once.
    phase(&http, &server.base, pid, 1, 20).await;
    let at_start = rss_mb(pid);
    println!(
        "RSS at start: {at_start:.1} MB (load average {})",
        load_average()
    );
    // The turns in `ROUNDS` rounds of the three phases, RSS after each phase: memory that
    // settles shows the same figure at the same point of every round; memory that grows with
    // the turns keeps climbing from round to round.
    let per_round = total.div_ceil(rounds);
    let one = (per_round / 10).max(1);
    let eight = (per_round * 3 / 10).max(8);
    let sixty_four = per_round.saturating_sub(one + eight).max(64);
    let mut turns = 20;
    for round in 1..=rounds {
        for (conversations, n) in [(1, one), (8, eight), (64, sixty_four)] {
            phase(&http, &server.base, pid, conversations, n).await;
            turns += n;
            println!(
                "RSS after round {round}'s {conversations}-way phase ({turns} turns): {:.1} MB",
                rss_mb(pid)
            );
        }
    }
    let after = rss_mb(pid);
    println!(
        "RSS after {} turns: {after:.1} MB ({:+.0}%)",
        turns,
        (after / at_start - 1.0) * 100.0
    );
}
