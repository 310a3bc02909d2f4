//! A real OpenID Connect provider for sign-in tests: `tests/oidc/provider.mjs` (panva's
//! OpenID Certified `oidc-provider` on Node.js) on a free loopback port, with one confidential
//! client, PKCE (S256) required, scopes `openid email profile`.
//!
//! Signing in: the authorization endpoint sends the browser to an HTML form
//! (`/interaction/<uid>`) with `login` and `password` fields; any login and any password are
//! accepted and there is no consent page, so after the form the browser lands on the redirect
//! URI with `code` and `state`. The account's `sub` is the login, `email` is
//! `<login>@example.com` (`email_verified` true), `name` the login capitalised ("alice" →
//! "Alice"); the ID token carries those claims (RS256-signed), as does the userinfo endpoint.
//!
//! Needs `node` (20.19 or newer) and `npm` on `PATH`. The first start runs `npm ci` in
//! `tests/oidc` if its `node_modules` is missing or older than `package-lock.json`
//! (`scripts/test` does the same before `cargo test`); concurrent tests, in one process or
//! several, wait for one install.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How long the provider may take to print `READY` (Node starts in well under a second).
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A running provider; the process is killed when this is dropped (and exits by itself if the
/// test process dies, as its stdin then closes).
pub struct OidcProvider {
    /// `http://127.0.0.1:<port>`, the issuer; discovery is at
    /// `{issuer}/.well-known/openid-configuration`.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: String,
    child: Child,
    // Held open: the provider exits when its stdin closes.
    _stdin: Option<ChildStdin>,
}

impl std::fmt::Debug for OidcProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcProvider")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("pid", &self.child.id())
            .finish()
    }
}

impl OidcProvider {
    /// Start a provider whose one client is `client_id`/`client_secret` (authenticating at the
    /// token endpoint with HTTP Basic, `client_secret_basic`) with these exact redirect URIs.
    /// Blocks until the provider listens (the first call may also wait for `npm ci`); panics
    /// with the provider's output if it cannot start.
    pub fn start(client_id: &str, client_secret: &str, redirect_uris: &[&str]) -> OidcProvider {
        assert!(
            !redirect_uris.is_empty() && redirect_uris.iter().all(|uri| !uri.contains(',')),
            "redirect URIs must be given, and none may contain a comma: {redirect_uris:?}"
        );
        ensure_installed();
        let dir = oidc_dir();
        let mut child = Command::new("node")
            .arg("provider.mjs")
            .arg("0")
            .current_dir(&dir)
            .env("OIDC_CLIENT_ID", client_id)
            .env("OIDC_CLIENT_SECRET", client_secret)
            .env("OIDC_REDIRECT_URIS", redirect_uris.join(","))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("could not run `node` (Node.js 20.19+ must be on PATH) for the OIDC provider: {e}")
            });
        let stdin = child.stdin.take();

        // Both outputs are drained for the provider's whole life (a full pipe would block it),
        // echoed to the test's output (shown when the test fails) and kept for a start-up
        // failure message. The stdout reader also reports the `READY` line.
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let (ready_tx, ready_rx) = mpsc::channel::<String>();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        forward_lines(stdout, Arc::clone(&tail), Some(ready_tx));
        forward_lines(stderr, Arc::clone(&tail), None);

        let issuer = match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(issuer) => issuer,
            Err(e) => {
                let _ = child.kill();
                let status = child.wait();
                // Let the readers catch the last lines.
                std::thread::sleep(Duration::from_millis(100));
                let output: Vec<String> = tail.lock().unwrap().iter().cloned().collect();
                panic!(
                    "the OIDC provider (node tests/oidc/provider.mjs) did not print READY ({e}; \
                     exit: {status:?}); its output:\n{}",
                    output.join("\n")
                );
            }
        };
        OidcProvider {
            issuer,
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
            child,
            _stdin: stdin,
        }
    }

    /// `{issuer}/.well-known/openid-configuration`.
    pub fn discovery_url(&self) -> String {
        format!("{}/.well-known/openid-configuration", self.issuer)
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Read `output` line by line on a thread until it closes: each line goes to stderr (prefixed,
/// captured by the test harness) and into `tail` (the last 50 lines); the first `READY <issuer>`
/// line sends the issuer to `ready`.
fn forward_lines(
    output: impl Read + Send + 'static,
    tail: Arc<Mutex<VecDeque<String>>>,
    mut ready: Option<mpsc::Sender<String>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { break };
            if let Some(issuer) = line.strip_prefix("READY ")
                && let Some(ready) = ready.take()
            {
                let _ = ready.send(issuer.trim().to_owned());
            }
            eprintln!("[oidc-provider] {line}");
            let mut tail = tail.lock().unwrap();
            if tail.len() == 50 {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    });
}

/// `tests/oidc`, the Node.js project of the provider.
fn oidc_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("oidc")
}

/// Whether `npm ci` has completed in `dir` since `package-lock.json` last changed: npm writes
/// `node_modules/.package-lock.json` at the end of an install.
fn installed(dir: &Path) -> bool {
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    match (
        modified(dir.join("node_modules/.package-lock.json")),
        modified(dir.join("package-lock.json")),
    ) {
        (Some(installed), Some(locked)) => installed >= locked,
        _ => false,
    }
}

/// Run `npm ci` in `tests/oidc` unless it is installed already: once per process (a
/// `OnceLock`), and across processes (test binaries run in parallel) under an exclusive lock
/// on `tests/oidc/.install.lock`. Panics if npm fails.
fn ensure_installed() {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        let dir = oidc_dir();
        if installed(&dir) {
            return Ok(());
        }
        let lock_path = dir.join(".install.lock");
        let lock = File::create(&lock_path)
            .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
        lock.lock()
            .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
        // Another process may have installed while this one waited for the lock.
        if installed(&dir) {
            return Ok(());
        }
        let output = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("could not run `npm` (Node.js's npm must be on PATH): {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "`npm ci` in {} failed ({}):\n{}{}",
                dir.display(),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(())
        // `lock` is released when it drops here.
    });
    if let Err(e) = result {
        panic!("the OIDC provider's Node.js dependencies are not installed: {e}");
    }
}
