//! Time to first token: through the local server (HTTP POST → queue → worker → engine → SSE)
//! against asking the scripted model directly for its first event.
//!
//! `cargo bench -p tests --bench ttft`; the ratio server / direct is the server path's overhead.

use backend::{ChatModel, ChatRequest, Reply, ScriptedModel};
use bridle::AppOptions;
use criterion::{Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tests::server::TestServer;

const REPLY: &str = "Hello there, this is a short scripted reply.";

fn request() -> ChatRequest {
    ChatRequest {
        model: "bench".into(),
        system: "You are a benchmark.".into(),
        messages: vec![],
        tools: Default::default(),
        settings: Default::default(),
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("time_to_first_token");

    let direct = ScriptedModel::repeating(vec![Reply::text(REPLY)]);
    group.bench_function("scripted_model_direct", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let mut stream = direct.stream(request()).await.unwrap();
                    std::hint::black_box(stream.next().await);
                    total += start.elapsed();
                    while stream.next().await.is_some() {}
                }
                total
            })
        })
    });

    let server = rt.block_on(TestServer::start(
        Arc::new(ScriptedModel::repeating(vec![Reply::text(REPLY)])),
        AppOptions::default(),
    ));
    group.bench_function("server_http_queue_engine_sse", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let id = server.new_conversation().await;
                    let url = server.url(&format!("/api/conversations/{id}/messages"));
                    let start = Instant::now();
                    let mut res = server
                        .client
                        .post(&url)
                        .json(&serde_json::json!({"text": "hi"}))
                        .send()
                        .await
                        .unwrap();
                    let mut seen = String::new();
                    while !seen.contains("event: token") {
                        let chunk = res.chunk().await.unwrap().expect("stream open");
                        seen.push_str(&String::from_utf8_lossy(&chunk));
                    }
                    total += start.elapsed();
                    while res.chunk().await.unwrap().is_some() {}
                }
                total
            })
        })
    });
    group.finish();
    rt.block_on(server.stop());
}

criterion_group!(benches, bench);
criterion_main!(benches);
