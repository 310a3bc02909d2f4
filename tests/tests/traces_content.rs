//! The turn of `traces.rs` with `BRIDLE_TRACE_CONTENT=1`: tool arguments and results are in
//! the tool spans as text.

use tests::otlp::Collector;
use tests::traced_turn::{THREE_ROUNDS_ARGUMENT, THREE_ROUNDS_RESULT, run_three_rounds};

#[tokio::test(flavor = "multi_thread")]
async fn with_trace_content_tool_arguments_and_results_are_exported() {
    let collector = Collector::install(true);
    let trace = run_three_rounds(collector, "act-1").await;
    let create = trace.one("execute_tool create_event");
    assert!(
        create
            .attr("gen_ai.tool.call.arguments")
            .is_some_and(|a| a.contains(THREE_ROUNDS_ARGUMENT)),
        "{create:?}"
    );
    let list = &trace.named("execute_tool list_events")[0];
    assert!(
        list.attr("gen_ai.tool.call.result")
            .is_some_and(|r| r.contains(THREE_ROUNDS_RESULT)),
        "{list:?}"
    );
    assert!(collector.exported_contains(THREE_ROUNDS_ARGUMENT));
}
