//! Headless Chromium for the browser tests, driven through ChromeDriver (Debian's `chromium`
//! and `chromium-driver`; `scripts/test` installs them when it can): a driver on a free port, a
//! session with a fresh profile (a window, or an emulated phone), and polling helpers.

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

pub use crate::wait::eventually;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// ChromeDriver on a free port, killed on drop with the browsers it started; then its temp
/// folder goes.
#[derive(Debug)]
pub struct Driver {
    child: Child,
    pub port: u16,
    /// The driver's and its browsers' `TMPDIR` (where Chromium puts its `org.chromium.*`
    /// folders) and the place for the test's profiles and files ([`Driver::temp`]). Dropped after
    /// [`Drop::drop`] has stopped every process that writes in it.
    tmp: tempfile::TempDir,
}

impl Driver {
    /// A path for a browser profile or a file inside the driver's temp folder (not created),
    /// removed when the driver is dropped, after its browsers are stopped.
    pub fn temp(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The driver leads its own process group, and its browsers are in it: a browser a
        // failed test left open does not outlive the driver (nor write in the folder as it goes).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a ChromeDriver gets to listen. Its first start on a fresh machine (cold disk cache,
/// two cores shared with the tests running beside it) has taken more than 5 s in CI.
const DRIVER_START: Duration = Duration::from_secs(60);

/// Start ChromeDriver and wait until it listens. A driver that exits before it listens (the free
/// port was taken in between, say) is started again on another port, up to three times; a
/// failure shows what the driver printed.
pub async fn start_driver() -> Driver {
    assert!(
        std::path::Path::new(CHROMEDRIVER).exists() && std::path::Path::new(CHROMIUM).exists(),
        "this test needs Chromium and ChromeDriver: scripts/test installs them when run as root, else run sudo apt-get install -y chromium chromium-driver"
    );
    let mut printed = Vec::new();
    for _ in 0..3 {
        match try_start_driver().await {
            Ok(driver) => return driver,
            Err(output) => printed.push(output),
        }
    }
    panic!(
        "chromedriver did not start listening; it printed:\n{}",
        printed.join("\n---\n")
    );
}

/// One try: a driver on a free port, or what it printed when it exited or did not listen in time.
async fn try_start_driver() -> Result<Driver, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tmp = tempfile::Builder::new()
        .prefix("bridle-chromedriver-")
        .tempdir()
        .expect("a temp folder for chromedriver");
    let log = tmp.path().join("chromedriver.log");
    let out = std::fs::File::create(&log).expect("a log file for chromedriver");
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .env("TMPDIR", tmp.path())
        .process_group(0)
        .stdout(out.try_clone().expect("the log file twice"))
        .stderr(out)
        .spawn()
        .expect("chromedriver starts");
    let mut driver = Driver { child, port, tmp };
    let printed = |why: String| {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        format!("port {port}: {why}\n{text}")
    };
    let deadline = tokio::time::Instant::now() + DRIVER_START;
    while tokio::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(driver);
        }
        if let Ok(Some(status)) = driver.child.try_wait() {
            return Err(printed(format!("exited ({status}) before it listened")));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(printed(format!("not listening after {DRIVER_START:?}")))
}

/// A headless browser session with its own profile folder and window size.
pub async fn browser(driver: &Driver, profile: &std::path::Path, size: (u32, u32)) -> Client {
    session(driver, profile, size, None).await
}

/// A headless session whose page is `size` CSS pixels, as on a phone (Chromium's windows are
/// never narrower than 500 pixels, so the phone is emulated).
pub async fn phone_browser(driver: &Driver, profile: &std::path::Path, size: (u32, u32)) -> Client {
    let metrics = json!({"deviceMetrics": {"width": size.0, "height": size.1, "pixelRatio": 1.0}});
    session(driver, profile, size, Some(metrics)).await
}

async fn session(
    driver: &Driver,
    profile: &std::path::Path,
    size: (u32, u32),
    mobile_emulation: Option<serde_json::Value>,
) -> Client {
    let mut options = json!({
        "binary": CHROMIUM,
        "args": [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync",
            format!("--window-size={},{}", size.0, size.1),
            format!("--user-data-dir={}", profile.display()),
        ]
    });
    if let Some(emulation) = mobile_emulation {
        options["mobileEmulation"] = emulation;
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), options);
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a browser session starts")
}

/// Type `text` in the web chat's box and press Send.
pub async fn send_message(c: &Client, text: &str) {
    let input = c.find(Locator::Id("input")).await.unwrap();
    input.send_keys(text).await.unwrap();
    press_send(c).await;
}

/// Press Send, with whatever the box holds.
pub async fn press_send(c: &Client) {
    c.find(Locator::Id("send"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// The chat's messages as shown, once the last one is `last` (waited for).
pub async fn shown_when_last_is(c: &Client, last: &str) -> Vec<String> {
    crate::wait::eventually(&format!("{last:?} shown last"), || async {
        let out = shown_messages(c).await?;
        (out.last().map(String::as_str) == Some(last)).then_some(out)
    })
    .await
}

/// The chat's messages as shown, oldest first (`None` while the page is changing under the
/// read).
pub async fn shown_messages(c: &Client) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for m in c.find_all(Locator::Css("#messages .msg")).await.ok()? {
        out.push(m.text().await.ok()?);
    }
    Some(out)
}

/// The text of the first element matching `css`, if there is one.
pub async fn text_of(c: &Client, css: &str) -> Option<String> {
    let el = c.find(Locator::Css(css)).await.ok()?;
    el.text().await.ok()
}

/// Press the sign-out button `css` (`#sign-out`, `#sign-out-everywhere`) and wait for the
/// signed-out page.
pub async fn sign_out_with(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    crate::wait::eventually("the signed-out page", || async {
        text_of(c, "#signed-out").await
    })
    .await;
}

/// The status the API answers this browser's session now (its conversation list).
pub async fn api_status(c: &Client) -> serde_json::Value {
    c.execute(
        "return fetch('/api/conversations').then(r => r.status);",
        vec![],
    )
    .await
    .unwrap()
}

/// Sign in as `login` on the test provider's login page (`tests/oidc`: any login, any
/// password), once the browser has been sent there; returns the page's address at the provider.
pub async fn sign_in_at_provider(c: &Client, login: &str) -> String {
    let field = eventually("the provider's login form", || async {
        c.find(Locator::Css("input[name=login]")).await.ok()
    })
    .await;
    let at = c.current_url().await.unwrap().to_string();
    field.send_keys(login).await.unwrap();
    c.find(Locator::Css("input[name=password]"))
        .await
        .unwrap()
        .send_keys("any password")
        .await
        .unwrap();
    c.find(Locator::Css("form [type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    at
}
