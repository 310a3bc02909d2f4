//! Recorded Chat Completions streams (`tests/fixtures/*.sse`) through the same SSE framing and
//! mapper the client uses. Each fixture is also replayed in small byte chunks, which must not
//! change the outcome.

use backend::{ModelEvent, ReasoningDelta, StopReason, Usage};
use backend_openai::{events_from_sse_bytes, sse_events};
use futures::StreamExt;
use serde_json::json;

/// An item as the tests compare it: the event, or the error's kind.
type Item = Result<ModelEvent, &'static str>;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn simplify(items: Vec<Result<ModelEvent, backend::BackendError>>) -> Vec<Item> {
    items.into_iter().map(|r| r.map_err(|e| e.kind())).collect()
}

fn in_chunks(bytes: &[u8], size: usize) -> Vec<Item> {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(size).map(|c| Ok(c.to_vec())).collect();
    let body = futures::stream::iter(chunks);
    simplify(futures::executor::block_on(sse_events(body).collect()))
}

fn check(name: &str, expected: Vec<Item>) {
    let bytes = fixture(name);
    let whole = simplify(events_from_sse_bytes(&bytes));
    assert_eq!(whole, expected, "{name}");
    for size in [1, 2, 7, 64] {
        assert_eq!(
            in_chunks(&bytes, size),
            expected,
            "{name} in {size}-byte chunks"
        );
    }
}

fn text(t: &str) -> Item {
    Ok(ModelEvent::text(t))
}

fn reasoning(t: &str) -> Item {
    Ok(ModelEvent::Reasoning {
        delta: ReasoningDelta::Text(t.into()),
    })
}

fn tool(id: &str, name: &str, input: serde_json::Value) -> Item {
    Ok(ModelEvent::ToolUse {
        id: id.into(),
        name: name.into(),
        input,
    })
}

fn done(stop_reason: StopReason, input: u64, output: u64, cache_read: u64) -> Item {
    Ok(ModelEvent::Done {
        stop_reason,
        usage: Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cache_read,
            cache_write_tokens: 0,
        },
    })
}

#[test]
fn plain_text_with_keep_alives_and_multibyte_characters() {
    check(
        "text.sse",
        vec![
            text("Bonjour"),
            text(" ! Un café"),
            text(" ☕ ?"),
            done(StopReason::EndTurn, 19, 6, 0),
        ],
    );
}

#[test]
fn one_tool_call_split_mid_token_across_many_chunks() {
    check(
        "tool_call_split.sse",
        vec![
            tool(
                "call_Vx81kQ2mZ",
                "get_weather",
                json!({"city": "Oslo", "unit": "celsius", "days": 3}),
            ),
            done(StopReason::ToolUse, 88, 24, 0),
        ],
    );
}

#[test]
fn parallel_tool_calls_interleaved_by_index_come_out_in_index_order() {
    check(
        "parallel_tool_calls.sse",
        vec![
            text("Checking both cities."),
            tool("call_Oslo111", "get_weather", json!({"city": "Oslo"})),
            tool("call_Rome222", "get_weather", json!({"city": "Rome"})),
            done(StopReason::ToolUse, 120, 40, 0),
        ],
    );
}

#[test]
fn repeated_id_name_type_and_explicit_nulls_llama_cpp_vllm() {
    check(
        "repeated_fields.sse",
        vec![
            reasoning("The user wants"),
            reasoning(" their notes."),
            tool(
                "mUj4c0aQ1Jx3qN7V",
                "search_notes",
                json!({"query": "dentist", "limit": 5}),
            ),
            done(StopReason::ToolUse, 412, 31, 0),
        ],
    );
}

#[test]
fn legacy_function_call_is_call_zero() {
    check(
        "legacy_function_call.sse",
        vec![
            tool("call_0", "get_time", json!({"tz": "Europe/Oslo"})),
            done(StopReason::ToolUse, 0, 0, 0),
        ],
    );
}

#[test]
fn length_is_max_tokens() {
    check(
        "length.sse",
        vec![
            text("Once upon a time, in a"),
            text(" land far"),
            done(StopReason::MaxTokens, 12, 8, 0),
        ],
    );
}

#[test]
fn content_filter_is_content_filtered() {
    check(
        "content_filter.sse",
        vec![text("I can"), done(StopReason::ContentFiltered, 0, 0, 0)],
    );
}

#[test]
fn usage_only_final_chunk_with_cached_tokens_and_crlf_lines() {
    // prompt_tokens 2048 include 1920 cached: input counts only the 128 uncached.
    check(
        "usage_cached.sse",
        vec![text("Yes."), done(StopReason::EndTurn, 128, 2, 1920)],
    );
}

#[test]
fn a_stream_cut_off_without_finish_reason_is_an_error_not_a_shorter_answer() {
    check(
        "cut_off.sse",
        vec![text("The answer is"), text(" forty"), Err("transport")],
    );
}

#[test]
fn malformed_arguments_become_malformed_tool_use_and_no_call() {
    check(
        "malformed_arguments.sse",
        vec![done(StopReason::MalformedToolUse, 50, 12, 0)],
    );
}

#[test]
fn ollama_reasoning_and_tool_call_with_finish_reason_stop() {
    check(
        "ollama_stop_with_tools.sse",
        vec![
            reasoning("Need the time."),
            tool("call_k2j8d1rl", "get_time", json!({"tz": "UTC"})),
            done(StopReason::ToolUse, 150, 22, 0),
        ],
    );
}

#[test]
fn an_error_object_mid_stream_is_an_error_item() {
    check(
        "error_midstream.sse",
        vec![text("Partial"), Err("throttled")],
    );
}

#[test]
fn done_without_finish_reason_is_an_error() {
    let items = simplify(events_from_sse_bytes(
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
    ));
    assert_eq!(items, vec![text("hi"), Err("transport")]);
}

#[test]
fn the_stream_ends_at_done_even_if_more_bytes_follow() {
    let mut bytes = fixture("length.sse");
    bytes.extend_from_slice(
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n",
    );
    let items = simplify(events_from_sse_bytes(&bytes));
    assert_eq!(items.last(), Some(&done(StopReason::MaxTokens, 12, 8, 0)));
    assert_eq!(items.len(), 3);
}

#[test]
fn a_finish_without_done_still_completes_when_the_body_closes() {
    let bytes = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n";
    assert_eq!(
        simplify(events_from_sse_bytes(bytes)),
        vec![text("ok"), done(StopReason::EndTurn, 0, 0, 0)]
    );
}

#[test]
fn an_event_named_error_is_an_error() {
    let bytes = b"event: error\ndata: upstream model crashed\n\n";
    assert_eq!(
        simplify(events_from_sse_bytes(bytes)),
        vec![Err("transport")]
    );
}

#[test]
fn a_broken_body_is_a_transport_error_with_its_source() {
    let body = futures::stream::iter(vec![
        Ok(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n".to_vec()),
        Err(std::io::Error::other("connection reset")),
    ]);
    let items = futures::executor::block_on(sse_events(body).collect::<Vec<_>>());
    assert_eq!(items.len(), 2);
    let err = items[1].as_ref().unwrap_err();
    assert_eq!(err.kind(), "transport");
    let source = std::error::Error::source(err).expect("source kept");
    assert!(source.to_string().contains("connection reset"));
}
