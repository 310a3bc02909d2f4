//! A trace carried across the job queue: the webhook writes the W3C `traceparent` (and
//! `tracestate`) of its span into the job; the worker makes the job's span its child.

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::BTreeMap;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The current span's trace context as headers; empty when tracing is off.
pub fn inject_current() -> BTreeMap<String, String> {
    let cx = tracing::Span::current().context();
    let mut headers = BTreeMap::new();
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&cx, &mut Carrier(&mut headers));
    }
    headers
}

/// Make `span` a child of the trace in `headers` (a job's trace context). Headers that are
/// empty or do not parse leave `span` where it was: it starts a trace of its own.
pub fn follow(span: &tracing::Span, headers: &BTreeMap<String, String>) {
    if headers.is_empty() {
        return;
    }
    let cx = TraceContextPropagator::new().extract(&Reader(headers));
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

struct Carrier<'a>(&'a mut BTreeMap<String, String>);

impl opentelemetry::propagation::Injector for Carrier<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

struct Reader<'a>(&'a BTreeMap<String, String>);

impl opentelemetry::propagation::Extractor for Reader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}
