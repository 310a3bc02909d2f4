//! Running the official MCP clients pinned in `tests/mcp-clients/` (installed there by
//! `scripts/test`) against a `/mcp` URL, and checking what they saw. Shared by
//! `functions/bridle/tests/mcp_clients.rs` (`bridle serve`) and `functions/web/tests/mcp_clients.rs`
//! (the web function's bootstrap), each including this file with `#[path]`.

use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one client run may take; a client still waiting after that failed.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(60);

pub fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-clients")
}

/// The virtual environment's Python, which has PyPI's `mcp`.
pub fn python() -> PathBuf {
    clients_dir().join(".venv/bin/python")
}

/// Run one official client (`client.py` with [`python`], `client.mjs` with `node`) against
/// `url` with `token`; its JSON line. Fails with the client's output if it fails or is still
/// running after [`CLIENT_DEADLINE`]. Blocks: call it off the async runtime's thread.
pub fn run_client(program: &Path, script: &str, url: &str, token: &str) -> Value {
    assert!(
        program.exists() || program == Path::new("node"),
        "{} is missing: run scripts/test, which installs the official MCP clients pinned in \
         tests/mcp-clients",
        program.display()
    );
    let mut child = Command::new(program)
        .arg(clients_dir().join(script))
        .arg(url)
        .arg(token)
        .current_dir(clients_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    let mut pipes = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let stdout = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipes.0.read_to_string(&mut text);
        text
    });
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipes.1.read_to_string(&mut text);
        text
    });
    let until = Instant::now() + CLIENT_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    match status {
        None => panic!("{script} was still running after {CLIENT_DEADLINE:?}:\n{stdout}\n{stderr}"),
        Some(status) => assert!(status.success(), "{script} failed:\n{stdout}\n{stderr}"),
    }
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{script} printed no JSON ({e}):\n{stdout}"))
}

/// What every client must have seen: the server's name, the MCP catalogue (a model-only tool
/// left out), a read call, a write call that made `title`, and invalid arguments answered with
/// the runner's readable sentence.
pub fn check_client_saw(seen: &Value, title: &str) {
    assert_eq!(seen["server"], "bridle", "{seen}");
    let tools: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"list_events") && tools.contains(&"create_event"),
        "{seen}"
    );
    assert!(!tools.contains(&"focus_event"), "{seen}");
    assert_eq!(seen["read"]["is_error"], false, "{seen}");
    assert_eq!(seen["write"]["is_error"], false, "{seen}");
    assert_eq!(seen["write"]["structured"]["title"], title, "{seen}");
    assert_eq!(seen["invalid"]["is_error"], true, "{seen}");
    let text = seen["invalid"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Invalid arguments for create_event") && text.contains("capacity"),
        "{seen}"
    );
}
