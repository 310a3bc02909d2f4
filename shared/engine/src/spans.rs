//! The turn's tracing spans and what they may hold. Exported as OpenTelemetry traces when the
//! process turns traces on (the `telemetry` crate); names follow the `gen_ai.*` semantic
//! conventions where they exist.
//!
//! Tool arguments and results go into spans only as sizes, unless the process asked for
//! content ([`trace_content`], `BRIDLE_TRACE_CONTENT=1`): they may hold anything a user said.

use std::sync::atomic::{AtomicBool, Ordering};
use tracing::field::Empty;

static CONTENT: AtomicBool = AtomicBool::new(false);

/// Put tool arguments and results into spans as text (`BRIDLE_TRACE_CONTENT=1`). Set once at
/// start-up; off by default.
pub fn trace_content(on: bool) {
    CONTENT.store(on, Ordering::Relaxed);
}

pub(crate) fn content() -> bool {
    CONTENT.load(Ordering::Relaxed)
}

/// Reading the conversation, its history and the tools before the first model call.
pub(crate) fn context_build() -> tracing::Span {
    tracing::info_span!("context_build", messages = Empty)
}

/// The guard (budgets, rate limits) deciding on one model call.
pub(crate) fn guard(call_number: u32) -> tracing::Span {
    tracing::info_span!("guard", call_number, outcome = Empty)
}

/// One model call; the usage, stop reason and timings are recorded when it ends. Its cost
/// (`cost_usd`) is recorded by the guard that prices it (the budget), which settles the call
/// inside this span.
pub(crate) fn model_call(backend: &str, model: &str) -> tracing::Span {
    tracing::info_span!(
        "model_call",
        otel.name = %format_args!("chat {model}"),
        gen_ai.operation.name = "chat",
        gen_ai.system = %backend,
        gen_ai.request.model = %model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read_input_tokens = Empty,
        gen_ai.usage.cache_creation_input_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        cost_usd = Empty,
        latency_ms = Empty,
        time_to_first_token_ms = Empty,
        error.type = Empty,
    )
}

/// Record a model call's end on its span: usage and stop reason, or the kind of failure.
pub(crate) fn model_call_done(
    span: &tracing::Span,
    result: &Result<(transcript::StopReason, transcript::Usage), backend::BackendError>,
    started: tokio::time::Instant,
    first_event_at: Option<tokio::time::Instant>,
) {
    // Nothing records it: no clock read or field for nobody (as `tool_done`).
    if span.is_disabled() {
        return;
    }
    span.record("latency_ms", started.elapsed().as_millis() as u64);
    if let Some(first) = first_event_at {
        span.record(
            "time_to_first_token_ms",
            first.saturating_duration_since(started).as_millis() as u64,
        );
    }
    match result {
        Ok((stop, usage)) => {
            span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            span.record(
                "gen_ai.usage.cache_read_input_tokens",
                usage.cache_read_tokens,
            );
            span.record(
                "gen_ai.usage.cache_creation_input_tokens",
                usage.cache_write_tokens,
            );
            span.record("gen_ai.response.finish_reasons", stop.as_str());
        }
        Err(err) => {
            span.record("error.type", err.kind());
        }
    }
}

/// One tool call; its outcome, duration and sizes are recorded when it ends.
pub(crate) fn tool_call(name: &str, id: &str, input: &serde_json::Value) -> tracing::Span {
    let span = tracing::info_span!(
        "tool_call",
        otel.name = %format_args!("execute_tool {name}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %name,
        gen_ai.tool.call.id = %id,
        outcome = Empty,
        duration_ms = Empty,
        arguments_chars = transcript::json_chars(input),
        result_chars = Empty,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
    );
    if content() && !span.is_disabled() {
        span.record("gen_ai.tool.call.arguments", input.to_string());
    }
    span
}

/// Record a tool call's end on its span.
pub(crate) fn tool_done(
    span: &tracing::Span,
    outcome: &str,
    elapsed: std::time::Duration,
    result: &transcript::Part,
) {
    // Nothing records it: the result is not measured for nobody.
    if span.is_disabled() {
        return;
    }
    span.record("outcome", outcome);
    span.record("duration_ms", elapsed.as_millis() as u64);
    let content = match result {
        transcript::Part::ToolResult { content, .. } => content,
        _ => return,
    };
    span.record("result_chars", transcript::json_chars(content));
    if self::content() {
        span.record("gen_ai.tool.call.result", content.to_string());
    }
}
