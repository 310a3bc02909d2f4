//! Cold start: from process spawn to the bootstrap's first request to the Lambda Runtime API
//! (a local stub here), for several binaries, alternating, many times; prints medians and the
//! ratios of the first to each of the others. The queue endpoint is a loopback stub too. The
//! environment holds what the webhook needs and what the worker needs (its table, model and a
//! reply channel; the worker makes no call before its first request), so either is measured. The bootstraps see the environment Lambda gives an
//! on-demand function (`AWS_LAMBDA_INITIALIZATION_TYPE=on-demand`); set that variable when
//! running this to measure another kind: with `provisioned-concurrency` the webhook warms its
//! SQS connection during init (one call, a loopback round trip here; in AWS a TLS handshake
//! moved from the first request into init, not added).
//!
//! `scripts/cold-start` builds the binaries and runs this:
//! `cold_start <runs> <bootstrap> <baseline bootstrap>...`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A stand-in SQS endpoint on loopback: answers every request with an empty JSON 200, so the
/// webhook's init-time warm-up (one `GetQueueAttributes`, when measured) is a local round trip
/// instead of a wait for a network this machine does not have.
fn sqs_stub() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                loop {
                    let Ok(n) = conn.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
                    let body_len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if got.len() < end + 4 + body_len {
                        continue;
                    }
                    got.drain(..end + 4 + body_len);
                    let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: 2\r\n\r\n{}";
                    if conn.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn time_to_first_request(binary: &str, listener: &TcpListener, sqs_port: u16) -> Duration {
    let port = listener.local_addr().unwrap().port();
    let init_type =
        std::env::var("AWS_LAMBDA_INITIALIZATION_TYPE").unwrap_or_else(|_| "on-demand".into());
    let start = Instant::now();
    let mut child = Command::new(binary)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}"))
        .env("AWS_LAMBDA_FUNCTION_NAME", "cold-start")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "stream")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "group")
        .env("AWS_LAMBDA_INITIALIZATION_TYPE", init_type)
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{sqs_port}"))
        .env(
            "QUEUE_URL",
            format!("http://127.0.0.1:{sqs_port}/123456789012/bridle-turns.fifo"),
        )
        .env(
            "GENERIC_WEBHOOK_SECRET",
            "cold-start-secret-0123456789abcdef",
        )
        .env("TABLE_NAME", "bridle")
        .env(
            "BEDROCK_MODEL_ID",
            "anthropic.claude-3-5-haiku-20241022-v1:0",
        )
        .env("PUBLIC_BASE_URL", "https://bridle.example/")
        .env(
            "GENERIC_CALLBACK_URL",
            format!("http://127.0.0.1:{sqs_port}/callback"),
        )
        .env("GENERIC_CALLBACK_SECRET", "cold-start-secret")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {binary}: {e}"));
    let (mut conn, _) = listener.accept().unwrap();
    let mut buf = [0u8; 1024];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "{binary} closed the connection before asking for work"
        );
        got.extend_from_slice(&buf[..n]);
    }
    let elapsed = start.elapsed();
    let line = String::from_utf8_lossy(&got);
    assert!(
        line.starts_with("GET /2018-06-01/runtime/invocation/next"),
        "{binary} asked: {}",
        line.lines().next().unwrap_or_default()
    );
    let _ = conn.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n");
    let _ = child.kill();
    let _ = child.wait();
    elapsed
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: cold_start <runs> <webhook bootstrap> <baseline bootstrap>...";
    let runs: usize = args.get(1).and_then(|n| n.parse().ok()).expect(usage);
    let binaries = &args[2..];
    assert!(binaries.len() >= 2, "{usage}");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let sqs = sqs_stub();
    // Warm the page cache for all, so we compare start-up, not disk reads.
    for _ in 0..3 {
        for binary in binaries {
            time_to_first_request(binary, &listener, sqs);
        }
    }
    let mut times = vec![Vec::new(); binaries.len()];
    for _ in 0..runs {
        for (binary, times) in binaries.iter().zip(&mut times) {
            times.push(time_to_first_request(binary, &listener, sqs));
        }
    }
    let medians: Vec<Duration> = times.into_iter().map(median).collect();
    let init_type =
        std::env::var("AWS_LAMBDA_INITIALIZATION_TYPE").unwrap_or_else(|_| "on-demand".into());
    println!("cold start ({init_type}), spawn → first Runtime API request, median of {runs}:");
    let name = |path: &str| path.rsplit('/').next().unwrap_or(path).to_owned();
    for (binary, m) in binaries.iter().zip(&medians) {
        println!("  {:<48} {:>6.2} ms", name(binary), m.as_secs_f64() * 1e3);
    }
    for (baseline, m) in binaries.iter().zip(&medians).skip(1) {
        let label = format!("ratio {} / {}", name(&binaries[0]), name(baseline));
        let ratio = medians[0].as_secs_f64() / m.as_secs_f64();
        println!("  {label:<48} {ratio:>6.2}");
    }
}
