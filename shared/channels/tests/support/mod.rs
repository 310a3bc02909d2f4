//! A platform API whose answers are cut off: each request is read whole, then answered with a
//! status and a body that stops part way (the connection closes before the promised length),
//! as when a connection drops while the platform's answer is on its way back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The API's base URL, and how many requests it has read whole.
pub async fn answer_cut_off(status: u16) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                if read_request(tcp, status).await {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    (base, calls)
}

/// Read one request (head and `content-length` body), answer it cut off; whether it was whole.
async fn read_request(mut tcp: TcpStream, status: u16) -> bool {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let whole = loop {
        let Ok(n) = tcp.read(&mut buf).await else {
            return false;
        };
        if n == 0 {
            return false;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                break true;
            }
        }
    };
    let answer = format!(
        "HTTP/1.1 {status} Answer\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\
         connection: close\r\n\r\n{{\"ok\": tr"
    );
    let _ = tcp.write_all(answer.as_bytes()).await;
    let _ = tcp.shutdown().await;
    whole
}
