//! What the local server puts up with from a client, over raw TCP where timing matters: slow
//! headers, an idle keep-alive connection, a slow or short body, more connections than the cap,
//! a client that stops reading an answer;
//! and every error answered with a JSON sentence (405 with `Allow`, 414, 431, a malformed path).

use bridle::AppOptions;
use bridle::server::HttpLimits;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tests::EchoModel;
use tests::server::TestServer;

const SHORT: Duration = Duration::from_millis(800);

async fn server(max_connections: usize) -> TestServer {
    TestServer::start(
        EchoModel::new(Duration::ZERO),
        AppOptions {
            http: HttpLimits {
                header_read: SHORT,
                request: SHORT,
                max_connections,
                ..HttpLimits::default()
            },
            ..AppOptions::default()
        },
    )
    .await
}

fn connect(s: &TestServer) -> TcpStream {
    let tcp = TcpStream::connect(s.base.trim_start_matches("http://")).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp
}

/// Read until the server closes the connection (or 5 s pass); what came, and when it closed.
fn read_to_close(tcp: &mut TcpStream) -> (String, Duration) {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("the connection stayed open past 5 s: {e}"),
        }
    }
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_idle_connections_are_closed() {
    let s = server(16).await;
    let (slow, idle, quiet) = tokio::task::spawn_blocking({
        let s_base = s.base.clone();
        move || {
            let host = s_base.trim_start_matches("http://").to_owned();
            // Headers that never finish.
            let mut slow = TcpStream::connect(&host).unwrap();
            slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
                .unwrap();
            let slow = read_to_close(&mut slow);
            // One whole request, then nothing on the kept-alive connection.
            let mut idle = TcpStream::connect(&host).unwrap();
            idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .unwrap();
            let idle = read_to_close(&mut idle);
            // A connection that says nothing at all, one that sends a single byte, and one
            // that starts HTTP/2's preface and stops: each would hold a connection slot for
            // good while the server waited to tell HTTP/1 from HTTP/2.
            let quiet: Vec<(String, Duration)> = [&b""[..], b"P", b"PRI * HTTP/2.0\r\n"]
                .into_iter()
                .map(|first| {
                    let mut tcp = TcpStream::connect(&host).unwrap();
                    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    tcp.write_all(first).unwrap();
                    read_to_close(&mut tcp)
                })
                .collect();
            (slow, idle, quiet)
        }
    })
    .await
    .unwrap();
    for (i, closed) in quiet.iter().enumerate() {
        assert!(
            closed.1 < Duration::from_secs(3),
            "quiet connection {i} is closed: {closed:?}"
        );
    }
    assert!(
        slow.1 >= SHORT / 2 && slow.1 < Duration::from_secs(3),
        "{slow:?}"
    );
    assert!(idle.0.starts_with("HTTP/1.1 200"), "{idle:?}");
    assert!(
        idle.1 < Duration::from_secs(3),
        "an idle connection is closed: {idle:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_short_body_gets_408_with_a_sentence() {
    let s = server(16).await;
    let conv = s.new_conversation().await;
    let mut tcp = connect(&s);
    let head = format!(
        "POST /api/conversations/{conv}/messages HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nContent-Length: 60\r\n\r\n{{\"text\": \"hel"
    );
    let (answer, took) = tokio::task::spawn_blocking(move || {
        tcp.write_all(head.as_bytes()).unwrap();
        read_to_close(&mut tcp)
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("application/json"), "{answer}");
    assert!(answer.contains("did not arrive whole"), "{answer}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    // Nothing of the half message was kept.
    assert!(s.history(&conv).await.is_empty());
}

/// An MCP call is answered when it is done, however long it runs (`mcp_server.rs`), but must
/// still arrive whole in time: a slow body gets the same 408, before any token is looked at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_mcp_body_gets_408_too() {
    let s = server(16).await;
    let mut tcp = connect(&s);
    let head = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer brd_x\r\n\
                Content-Type: application/json\r\nContent-Length: 60\r\n\r\n{\"jsonrpc\": ";
    let (answer, took) = tokio::task::spawn_blocking(move || {
        tcp.write_all(head.as_bytes()).unwrap();
        read_to_close(&mut tcp)
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive whole"), "{answer}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_for_a_free_one() {
    let s = server(1).await;
    let host = s.base.trim_start_matches("http://").to_owned();
    let (waited, answer) = tokio::task::spawn_blocking(move || {
        // The one connection the server serves now: open, saying nothing yet.
        let mut first = TcpStream::connect(&host).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut second = TcpStream::connect(&host).unwrap();
        second
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let started = Instant::now();
        second
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .unwrap();
        // The first connection ends (its header timer, or here its close) before the second
        // is served.
        std::thread::sleep(Duration::from_millis(300));
        first
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .unwrap();
        let _ = read_to_close(&mut first);
        let (answer, _) = read_to_close(&mut second);
        (started.elapsed(), answer)
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        waited >= Duration::from_millis(300),
        "the second connection waited for the first: {waited:?}"
    );
}

#[tokio::test]
async fn every_error_is_a_json_sentence() {
    let s = server(16).await;
    let http = reqwest::Client::new();
    let check = |res: reqwest::Response, status: u16| async move {
        assert_eq!(res.status().as_u16(), status);
        let allow = res
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = res.json().await.expect("a JSON body");
        let sentence = body["error"]
            .as_str()
            .expect("an error sentence")
            .to_owned();
        assert!(!sentence.is_empty());
        (sentence, allow)
    };
    let (sentence, allow) = check(http.post(s.url("/api/usage")).send().await.unwrap(), 405).await;
    assert_eq!(allow.as_deref(), Some("GET,HEAD"));
    assert!(sentence.contains("Allow"), "{sentence}");
    let long = format!("/api/conversations/{}/messages", "a".repeat(9_000));
    check(http.get(s.url(&long)).send().await.unwrap(), 414).await;
    let big = "x".repeat(40 * 1024);
    check(
        http.get(s.url("/api/conversations"))
            .header("x-big", big)
            .send()
            .await
            .unwrap(),
        431,
    )
    .await;
    check(
        http.get(s.url("/api/conversations/%FF%FE/messages"))
            .send()
            .await
            .unwrap(),
        400,
    )
    .await;
    check(http.get(s.url("/no/such/page")).send().await.unwrap(), 404).await;
}

#[tokio::test]
async fn without_sign_in_only_loopback_host_names_are_served() {
    let s = server(16).await;
    let http = reqwest::Client::new();
    let get = |host: &'static str, path: &'static str| {
        let http = http.clone();
        let url = s.url(path);
        async move { http.get(url).header("host", host).send().await.unwrap() }
    };
    // A page whose DNS name was rebound to 127.0.0.1 reaches the server under its own name.
    let rebound = get("evil.example:8080", "/api/conversations").await;
    assert_eq!(rebound.status(), 421);
    let body: Value = rebound.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("127.0.0.1"));
    assert_eq!(get("evil.example", "/").await.status(), 421);
    for host in [
        "localhost:8080",
        "127.0.0.1:8080",
        "[::1]:8080",
        "LOCALHOST",
    ] {
        assert_eq!(
            get(host, "/api/conversations").await.status(),
            200,
            "{host}"
        );
    }
    // The platforms' signed webhooks may come through a tunnel under its own name.
    assert_ne!(
        get("bridle.trycloudflare.com", "/webhooks/whatsapp")
            .await
            .status(),
        421
    );
}

/// A client that stops reading an answer (its receive window full) is let go once the server's
/// writes have stalled for `write_stall`: it holds no connection for good (with one connection
/// allowed, the next request waits for exactly that). The turn goes on without it, and its
/// answer is recorded for the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_let_go_and_the_turn_still_answers() {
    // More than the server's send buffer and the client's small receive window hold together.
    let answer = "x".repeat(16 << 20);
    let model = std::sync::Arc::new(backend::ScriptedModel::new([backend::Reply::text(&answer)]));
    let s = TestServer::start(
        model.clone(),
        AppOptions {
            http: HttpLimits {
                write_stall: Duration::from_secs(1),
                max_connections: 1,
                // The test client's idle keep-alive connection lets the one place go soon.
                header_read: Duration::from_millis(300),
                ..HttpLimits::default()
            },
            ..AppOptions::default()
        },
    )
    .await;
    let conversation = s.new_conversation().await;
    let addr: std::net::SocketAddr = s.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(addr).await.unwrap().into_std().unwrap();
    tcp.set_nonblocking(false).unwrap();
    let (drain_tx, drain_rx) = std::sync::mpsc::channel::<()>();
    let client = tokio::task::spawn_blocking({
        let conversation = conversation.clone();
        let mut tcp = tcp;
        move || {
            let body = r#"{"text": "Tell me everything"}"#;
            write!(
                tcp,
                "POST /api/conversations/{conversation}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            // Take the first bytes, then read nothing until told.
            let mut head = [0u8; 1024];
            let _ = tcp.read(&mut head).unwrap();
            drain_rx.recv().unwrap();
            // Drain what the buffers held: the connection ends before the answer does.
            tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut read = 0usize;
            let mut buf = vec![0u8; 1 << 20];
            let mut tail = Vec::new();
            loop {
                match tcp.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        read += n;
                        tail = buf[n.saturating_sub(64)..n].to_vec();
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                    Err(e) => panic!("the connection was not let go: {e} after {read} bytes"),
                }
            }
            (read, String::from_utf8_lossy(&tail).contains("event: done"))
        }
    });
    tests::eventually("the model to be asked", || async {
        (model.requests().len() == 1).then_some(())
    })
    .await;

    // The one connection the server allows is free again once the stalled one is let go.
    let started = Instant::now();
    let health = reqwest::Client::new()
        .get(s.url("/healthz"))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("a connection is free within the stall limit");
    assert_eq!(health.status(), 200);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    drain_tx.send(()).unwrap();
    let (read, done) = client.await.unwrap();
    assert!(
        !done && read < answer.len(),
        "the whole answer came ({read} bytes)"
    );

    // The turn went on: the whole answer is recorded.
    let id: transcript::ConversationId = conversation.as_str().into();
    let recorded = tests::eventually("the answer recorded", || async {
        let last = s.app.store.last_visible(&id).await.ok()??;
        (last.role == store::VisibleRole::Assistant).then_some(last)
    })
    .await;
    assert_eq!(recorded.text.len(), answer.len());
    s.stop().await;
}

/// One user holds at most eight reply streams open at once: a ninth message is refused before
/// it is queued (429 and a sentence; nothing of it is kept), and once a stream has ended the
/// next message goes through. Without this, messages posted within the write rate into one
/// slow conversation pile up open streams until nobody else can connect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_holds_at_most_eight_reply_streams_open() {
    let s = TestServer::start(
        EchoModel::new(Duration::from_secs(2)),
        AppOptions::default(),
    )
    .await;
    let conv = s.new_conversation().await;
    let http = reqwest::Client::new();
    let post = |text: String| {
        let req = http
            .post(s.url(&format!("/api/conversations/{conv}/messages")))
            .json(&serde_json::json!({"text": text}));
        async move { req.send().await.unwrap() }
    };
    let mut open = Vec::new();
    for n in 0..8 {
        let res = post(format!("message {n}")).await;
        assert_eq!(res.status(), 200);
        open.push(res);
    }
    let refused = post("one too many".into()).await;
    assert_eq!(refused.status(), 429);
    let said: serde_json::Value = refused.json().await.unwrap();
    assert!(
        said["error"]
            .as_str()
            .unwrap()
            .contains("replies are streaming to you already"),
        "{said}"
    );
    // The first turn is done: its stream ends, and its place is free again.
    let first = open.remove(0).text().await.unwrap();
    assert!(first.contains("event: done"), "{first}");
    let res = post("now there is room".into()).await;
    assert_eq!(res.status(), 200);
    drop(open);
    drop(res);
    let texts: Vec<String> = s.history(&conv).await.into_iter().map(|(_, t)| t).collect();
    assert!(
        !texts.iter().any(|t| t.contains("one too many")),
        "the refused message was not kept: {texts:?}"
    );
}

/// A stream whose client went away after `queued` keeps its place until its turn is done: the
/// turn runs on, and a user who posted and hung up over and over would otherwise keep any
/// number of turns running (every turn slot of the server) behind everyone else's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_stream_left_after_queued_holds_its_place_until_its_turn_is_done() {
    let s = TestServer::start(
        EchoModel::new(Duration::from_secs(2)),
        AppOptions {
            streams_per_user: 3,
            ..AppOptions::default()
        },
    )
    .await;
    let http = reqwest::Client::new();
    let post = |conv: String, text: &str| {
        let req = http
            .post(s.url(&format!("/api/conversations/{conv}/messages")))
            .json(&serde_json::json!({ "text": text }));
        async move { req.send().await.unwrap() }
    };
    // Three messages (her cap here) in three conversations (their turns run side by side),
    // each stream dropped once it says `queued`.
    let mut conversations = Vec::new();
    for n in 0..3 {
        let conv = s.new_conversation().await;
        let mut res = post(conv.clone(), &format!("message {n}")).await;
        assert_eq!(res.status(), 200);
        let first = res.chunk().await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&first).contains("event: queued"));
        drop(res);
        conversations.push(conv);
    }
    let more = s.new_conversation().await;
    let refused = post(more.clone(), "one too many").await;
    assert_eq!(
        refused.status(),
        429,
        "three turns of hers are still running"
    );
    // The turns finish (their answers recorded): the places are free again.
    for conv in &conversations {
        let id: transcript::ConversationId = conv.as_str().into();
        tests::eventually("the answer recorded", || async {
            let last = s.app.store.last_visible(&id).await.ok()??;
            (last.role == store::VisibleRole::Assistant).then_some(())
        })
        .await;
    }
    let posted = tests::eventually("a place free again", || async {
        let res = post(more.clone(), "now there is room").await;
        (res.status() == 200).then_some(res)
    })
    .await;
    let answer = posted.text().await.unwrap();
    assert!(answer.contains("event: done"), "{answer}");
    s.stop().await;
}

/// Without sign-in, another site's page can still make the browser post a form to 127.0.0.1
/// (a form needs no preflight): a change whose `Origin` is another site's, or `null`, is
/// refused; the server's own page (same origin) and clients that name no origin are served.
#[tokio::test]
async fn without_sign_in_a_change_posted_from_another_site_is_refused() {
    let s = server(16).await;
    let http = reqwest::Client::new();
    let own = s.base.clone();
    let post = |origin: Option<String>| {
        let mut req = http
            .post(s.url("/api/conversations"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("");
        if let Some(origin) = origin {
            req = req.header("origin", origin);
        }
        async move { req.send().await.unwrap() }
    };
    for origin in [
        "http://evil.example",
        "null",
        "https://127.0.0.1.evil.example",
    ] {
        let res = post(Some(origin.into())).await;
        assert_eq!(res.status(), 403, "{origin}");
        let said: serde_json::Value = res.json().await.unwrap();
        assert!(
            said["error"].as_str().unwrap().contains("own pages"),
            "{said}"
        );
    }
    let listed = |s: &TestServer| {
        let url = s.url("/api/conversations");
        async move {
            reqwest::get(url)
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    assert_eq!(
        listed(&s).await.as_array().unwrap().len(),
        0,
        "none was made"
    );
    assert!(post(Some(own)).await.status().is_success());
    assert!(post(None).await.status().is_success());
    assert_eq!(listed(&s).await.as_array().unwrap().len(), 2);
}

/// An address added to this machine's loopback interface for one test: neither loopback nor
/// private, so a connection from it is counted as a client from the internet is. Adding it
/// needs root (CAP_NET_ADMIN), which this machine and CI have; it is removed when dropped.
struct InternetAddress(std::net::Ipv4Addr);

impl InternetAddress {
    fn add(ip: [u8; 4]) -> Self {
        let ip = std::net::Ipv4Addr::from(ip);
        let status = std::process::Command::new("ip")
            .args(["addr", "add", &format!("{ip}/32"), "dev", "lo"])
            .status()
            .expect("the ip command runs");
        assert!(
            status.success(),
            "adding an address to lo needs root (CAP_NET_ADMIN): run this test as root"
        );
        Self(ip)
    }

    /// A connection to `s` from this address.
    async fn connect(&self, s: &TestServer) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((self.0, 0).into()).unwrap();
        let to = s.base.trim_start_matches("http://").parse().unwrap();
        let tcp = socket.connect(to).await.unwrap().into_std().unwrap();
        tcp.set_nonblocking(false).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        tcp
    }
}

impl Drop for InternetAddress {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["addr", "del", &format!("{}/32", self.0), "dev", "lo"])
            .status();
    }
}

/// Whether the server closed `tcp` without a word (rather than waiting for a request).
fn closed_at_once(tcp: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match tcp.read(&mut buf) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(n) => panic!("the server said {:?}", String::from_utf8_lossy(&buf[..n])),
    }
}

/// Whether `/healthz` is answered on `tcp`.
fn served(tcp: &mut TcpStream) -> bool {
    let request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if tcp.write_all(request).is_err() {
        return false;
    }
    let mut got = Vec::new();
    let _ = tcp.read_to_end(&mut got);
    got.starts_with(b"HTTP/1.1 200")
}

/// One client holds its share of the connections and no more: past it, its next connection is
/// closed at once, while another client and loopback (a reverse proxy on the same host) are
/// served; a place it gives back is its own again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_past_its_share_of_connections_is_closed_at_once() {
    let (one, other) = (
        InternetAddress::add([198, 51, 100, 71]),
        InternetAddress::add([198, 51, 100, 72]),
    );
    let s = TestServer::start(
        EchoModel::new(Duration::ZERO),
        AppOptions {
            http: HttpLimits {
                max_per_peer: 2,
                ..HttpLimits::default()
            },
            ..AppOptions::default()
        },
    )
    .await;
    // Two connections saying nothing (the header timer would close them after 10 s).
    let held = vec![one.connect(&s).await, one.connect(&s).await];
    let mut third = one.connect(&s).await;
    let mut others = other.connect(&s).await;
    let mut local: Vec<TcpStream> = (0..4).map(|_| connect(&s)).collect();
    let (third_closed, others_served, local_served) = tokio::task::spawn_blocking(move || {
        (
            closed_at_once(&mut third),
            served(&mut others),
            local.iter_mut().all(served),
        )
    })
    .await
    .unwrap();
    assert!(third_closed, "past its share: closed at once");
    assert!(others_served, "another client is served");
    assert!(local_served, "loopback is not counted");

    drop(held);
    // Its places come back once the server has seen them closed.
    let started = Instant::now();
    loop {
        let mut again = one.connect(&s).await;
        let ok = tokio::task::spawn_blocking(move || served(&mut again))
            .await
            .unwrap();
        if ok {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "its places were given back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
