//! An OTLP/HTTP trace receiver in the test process (`POST /v1/traces`, protobuf, decoded with
//! the `opentelemetry-proto` types), and the process's trace export pointed at it: the real
//! exporter, the real bounded queue, the real HTTP request.

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use prost::Message;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// One span as the collector received it.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub service: String,
    pub attributes: HashMap<String, String>,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// What the receiver got: the decoded spans and every request body as it arrived.
#[derive(Debug, Default)]
pub struct Received {
    pub spans: Vec<ReceivedSpan>,
    pub bodies: Vec<Vec<u8>>,
}

/// The process's receiver and exporter.
#[derive(Debug)]
pub struct Collector {
    received: Arc<Mutex<Received>>,
    pub telemetry: telemetry::Telemetry,
}

static COLLECTOR: OnceLock<Collector> = OnceLock::new();

impl Collector {
    /// Start the receiver (on a thread of its own, so it outlives each test's runtime) and
    /// install the trace export as the process's subscriber, once per test binary.
    /// `trace_content` is `BRIDLE_TRACE_CONTENT`.
    pub fn install(trace_content: bool) -> &'static Collector {
        COLLECTOR.get_or_init(|| {
            let received = Arc::new(Mutex::new(Received::default()));
            let url = serve(received.clone());
            let mut settings = telemetry::Settings::from_vars("bridle-test", &HashMap::new());
            settings.enabled = true;
            settings.endpoint = Some(url);
            settings.trace_content = trace_content;
            let (telemetry, layer) = telemetry::Telemetry::start(&settings)
                .expect("the exporter starts")
                .expect("traces are on");
            tracing_subscriber::registry().with(vec![layer]).init();
            engine::trace_content(trace_content);
            Collector {
                received,
                telemetry,
            }
        })
    }

    /// Export what has ended and give the spans of `trace_id` (hex).
    pub fn trace(&self, trace_id: &str) -> Vec<ReceivedSpan> {
        self.telemetry.flush(Duration::from_secs(10));
        let received = self.received.lock().unwrap();
        received
            .spans
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect()
    }

    /// Every span received so far.
    pub fn all(&self) -> Vec<ReceivedSpan> {
        self.received.lock().unwrap().spans.clone()
    }

    /// Whether `needle` appears anywhere in what was exported (any request body, raw bytes).
    pub fn exported_contains(&self, needle: &str) -> bool {
        self.telemetry.flush(Duration::from_secs(10));
        let received = self.received.lock().unwrap();
        received
            .bodies
            .iter()
            .any(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
    }
}

fn serve(received: Arc<Mutex<Received>>) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = Router::new().route(
                "/v1/traces",
                post(move |body: Bytes| {
                    let received = received.clone();
                    async move {
                        record(&received, &body);
                        // An empty ExportTraceServiceResponse.
                        (
                            [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
                            Vec::<u8>::new(),
                        )
                    }
                }),
            );
            axum::serve(listener, app).await.unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    format!("http://{addr}/v1/traces")
}

fn record(received: &Mutex<Received>, body: &[u8]) {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
    let mut received = received.lock().unwrap();
    received.bodies.push(body.to_vec());
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref())
            .map(text)
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                received.spans.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    service: service.clone(),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| {
                            (
                                kv.key.clone(),
                                kv.value.as_ref().map(text).unwrap_or_default(),
                            )
                        })
                        .collect(),
                });
            }
        }
    }
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
