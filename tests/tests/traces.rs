//! OpenTelemetry traces of a turn, exported over OTLP/HTTP to a receiver in this process: a turn
//! with three tool rounds is one trace, joined to the webhook's through the job, with the spans
//! and attributes of the claim, the context, each guard, model call and tool call, and the
//! delivery — and without `BRIDLE_TRACE_CONTENT` no tool argument or result text leaves.
//! (`traces_content.rs` is the same turn with content on: a process has one trace exporter.)

use tests::otlp::Collector;
use tests::traced_turn::{THREE_ROUNDS_ARGUMENT, THREE_ROUNDS_RESULT, run_three_rounds};

#[tokio::test(flavor = "multi_thread")]
async fn a_three_tool_round_turn_is_one_trace_with_its_spans_and_attributes() {
    let collector = Collector::install(false);
    let trace = run_three_rounds(collector, "act-1").await;

    for tool in trace.named_prefix("execute_tool ") {
        assert_eq!(tool.attr("gen_ai.tool.call.arguments"), None, "{tool:?}");
        assert_eq!(tool.attr("gen_ai.tool.call.result"), None, "{tool:?}");
    }
    assert!(
        !collector.exported_contains(THREE_ROUNDS_ARGUMENT),
        "a tool argument was exported without BRIDLE_TRACE_CONTENT"
    );
    assert!(
        !collector.exported_contains(THREE_ROUNDS_RESULT),
        "a tool result was exported without BRIDLE_TRACE_CONTENT"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_without_trace_context_starts_its_own_trace() {
    let collector = Collector::install(false);
    let trace = tests::traced_turn::run_without_context(collector, "act-2").await;
    let job = trace.one("turn_job");
    assert_eq!(job.parent_span_id, "", "the job span is the trace's root");
    trace.one("turn");
    trace.one("delivery");
}
