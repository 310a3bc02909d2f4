//! The turn the trace tests export: a webhook span whose W3C context the job carries, then a
//! turn with three tool rounds through the one job path, and the checks every such trace must
//! pass (one trace, the spans in it, their attributes).

use crate::otlp::{Collector, ReceivedSpan};
use crate::{Harness, web_job, web_jobs};
use backend::Reply;
use engine::CollectSink;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use transcript::{StopReason, Usage};

/// Text only a tool argument holds (the title of the event the turn creates).
pub const THREE_ROUNDS_ARGUMENT: &str = "Quokka Gala";
/// Text only a tool result holds (an event `list_events` returns).
pub const THREE_ROUNDS_RESULT: &str = "Spring Open";

const USAGE: Usage = Usage {
    input_tokens: 120,
    output_tokens: 30,
    cache_read_tokens: 900,
    cache_write_tokens: 45,
};

/// The spans of one trace.
#[derive(Debug)]
pub struct Trace {
    pub trace_id: String,
    pub spans: Vec<ReceivedSpan>,
}

impl Trace {
    pub fn named(&self, name: &str) -> Vec<&ReceivedSpan> {
        self.spans.iter().filter(|s| s.name == name).collect()
    }

    pub fn named_prefix(&self, prefix: &str) -> Vec<&ReceivedSpan> {
        self.spans
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .collect()
    }

    /// The one span called `name`.
    pub fn one(&self, name: &str) -> &ReceivedSpan {
        let found = self.named(name);
        assert_eq!(found.len(), 1, "one {name} span in {:#?}", self.names());
        found[0]
    }

    pub fn names(&self) -> Vec<&str> {
        self.spans.iter().map(|s| s.name.as_str()).collect()
    }
}

/// Prices for the test model, per million tokens: input $1, output $10, cache read $0.10,
/// cache write $2.
fn budget_config() -> budget::BudgetConfig {
    budget::BudgetConfig {
        prices: budget::PriceTable::with_file(
            "test-prices.json",
            r#"{"models": {"test-model": {"input": 1, "output": 10, "cache_read": 0.1, "cache_write": 2}}}"#,
        )
        .unwrap(),
        ..budget::BudgetConfig::default()
    }
}

fn replies() -> Vec<Reply> {
    vec![
        Reply::tool_call("c1", "list_events", json!({})).usage(USAGE),
        Reply::tool_call(
            "c2",
            "create_event",
            json!({"title": THREE_ROUNDS_ARGUMENT, "date": "2026-05-01"}),
        )
        .usage(USAGE),
        Reply::tool_call("c3", "list_events", json!({})).usage(USAGE),
        Reply::text("Your gala is booked.").usage(USAGE),
    ]
}

/// Run the three-round turn as a job that carries a webhook span's trace context, and check
/// the trace: everything in one trace under the webhook's span, with the attributes the issue
/// asks for. Content checks are the caller's.
pub async fn run_three_rounds(collector: &Collector, message_id: &str) -> Trace {
    // The budget prices each call (and records the cost on its span).
    let ledger = Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap());
    let guard = budget::BudgetGuard::new(ledger, Arc::new(budget_config()), budget::system_clock());
    let h = Harness::with_guard(replies(), Arc::new(guard)).await;
    // The webhook's side: its span's context goes into the job.
    let webhook = tracing::info_span!("webhook");
    let context = webhook.in_scope(telemetry::inject_current);
    drop(webhook);
    let traceparent = context
        .get("traceparent")
        .expect("the job carries a traceparent")
        .clone();
    let mut fields = traceparent.split('-');
    let (trace_id, webhook_span) = (fields.nth(1).unwrap(), fields.next().unwrap());
    let mut job = web_job(&h.conversation.0, "user-1", message_id, "book the gala");
    job.trace_context = context.clone();
    let jobs = web_jobs(h.engine.clone(), h.store.clone(), Arc::default());
    let ran = jobs
        .run_streamed(&job, Duration::from_secs(60), &CollectSink::default())
        .await;
    let outcome = ran.turn.expect("the turn ran");
    assert_eq!(outcome.reply, "Your gala is booked.");
    assert_eq!(h.calls.list().len(), 3, "three tool rounds");

    let trace = Trace {
        trace_id: trace_id.to_owned(),
        spans: collector.trace(trace_id),
    };
    check_three_rounds(&trace, webhook_span);
    trace
}

/// A job with no trace context (an old job, or tracing was off at the webhook).
pub async fn run_without_context(collector: &Collector, message_id: &str) -> Trace {
    let h = Harness::new([Reply::text("Hello.")]).await;
    let job = web_job(&h.conversation.0, "user-1", message_id, "hi");
    assert!(job.trace_context.is_empty());
    let jobs = web_jobs(h.engine.clone(), h.store.clone(), Arc::default());
    let ran = jobs
        .run_streamed(&job, Duration::from_secs(60), &CollectSink::default())
        .await;
    ran.turn.expect("the turn ran");
    collector.telemetry.flush(Duration::from_secs(10));
    // Its trace is the one whose job span names this job.
    let key = job.dedupe_key();
    let trace_id = collector
        .all()
        .into_iter()
        .find(|s| s.name == "turn_job" && s.attr("job") == Some(key.as_str()))
        .expect("the job's span was exported")
        .trace_id;
    Trace {
        spans: collector.trace(&trace_id),
        trace_id,
    }
}

fn check_three_rounds(trace: &Trace, webhook_span: &str) {
    let job = trace.one("turn_job");
    assert_eq!(
        job.parent_span_id, webhook_span,
        "the job's span is a child of the webhook's"
    );
    assert_eq!(job.attr("channel"), Some("web"));
    assert_eq!(job.attr("outcome"), Some("Done"));
    assert_eq!(trace.one("job_claim").attr("outcome"), Some("fresh"));
    let turn = trace.one("turn");
    trace.one("context_build");
    trace.one("delivery");

    let guards = trace.named("guard");
    assert_eq!(guards.len(), 4, "a guard before each model call");
    assert!(guards.iter().all(|g| g.attr("outcome") == Some("allowed")));

    let calls = trace.named("chat test-model");
    assert_eq!(calls.len(), 4, "four model calls: {:#?}", trace.names());
    for call in &calls {
        assert_eq!(call.parent_span_id, turn.span_id, "{call:?}");
        assert_eq!(call.attr("gen_ai.operation.name"), Some("chat"));
        assert_eq!(call.attr("gen_ai.request.model"), Some("test-model"));
        assert_eq!(call.attr("gen_ai.usage.input_tokens"), Some("120"));
        assert_eq!(call.attr("gen_ai.usage.output_tokens"), Some("30"));
        assert_eq!(
            call.attr("gen_ai.usage.cache_read_input_tokens"),
            Some("900")
        );
        assert_eq!(
            call.attr("gen_ai.usage.cache_creation_input_tokens"),
            Some("45")
        );
        // 120 × $1 + 30 × $10 + 900 × $0.10 + 45 × $2 per million tokens.
        let cost: f64 = call.attr("cost_usd").expect("cost_usd").parse().unwrap();
        assert!((cost - 0.0006).abs() < 1e-9, "cost {cost} in {call:?}");
        assert!(call.attr("latency_ms").is_some(), "{call:?}");
        assert!(call.attr("time_to_first_token_ms").is_some(), "{call:?}");
    }
    let stops: Vec<_> = calls
        .iter()
        .map(|c| c.attr("gen_ai.response.finish_reasons").unwrap_or_default())
        .collect();
    let tool_use = StopReason::ToolUse.as_str();
    assert_eq!(
        stops.iter().filter(|s| **s == tool_use).count(),
        3,
        "{stops:?}"
    );
    assert_eq!(
        stops
            .iter()
            .filter(|s| **s == StopReason::EndTurn.as_str())
            .count(),
        1
    );

    let tools = trace.named_prefix("execute_tool ");
    assert_eq!(tools.len(), 3, "{:#?}", trace.names());
    assert_eq!(trace.named("execute_tool list_events").len(), 2);
    let create = trace.one("execute_tool create_event");
    assert_eq!(create.attr("gen_ai.tool.name"), Some("create_event"));
    assert_eq!(create.attr("gen_ai.tool.call.id"), Some("c2"));
    let arguments = json!({"title": THREE_ROUNDS_ARGUMENT, "date": "2026-05-01"});
    assert_eq!(
        create.attr("arguments_chars"),
        Some(transcript::json_chars(&arguments).to_string().as_str())
    );
    for tool in &tools {
        assert_eq!(tool.attr("outcome"), Some("ok"), "{tool:?}");
        assert!(tool.attr("duration_ms").is_some(), "{tool:?}");
        let size: usize = tool.attr("result_chars").unwrap().parse().unwrap();
        assert!(size > 0, "{tool:?}");
        assert_eq!(tool.parent_span_id, turn.span_id, "{tool:?}");
    }
    assert!(trace.spans.iter().all(|s| s.service == "bridle-test"));
}
