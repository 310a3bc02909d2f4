//! One event-stream message as Bedrock sends it, and its encoding with `aws-smithy-eventstream`
//! (prelude, headers, payload, both CRCs).
//!
//! Payloads follow the ConverseStream wire format field for field, including the `p` padding
//! field Bedrock adds to hide payload sizes (clients must ignore it).

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use backend::Usage;
use bytes::Bytes;
use serde_json::{Value, json};

/// One event-stream message: an event (`:message-type` = `event`) or an exception.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Event {
        event_type: String,
        payload: Value,
    },
    Exception {
        exception_type: String,
        payload: Value,
    },
}

impl Frame {
    fn event(event_type: &str, payload: Value) -> Self {
        Frame::Event {
            event_type: event_type.to_owned(),
            payload: padded(payload),
        }
    }

    /// An event of a type newer than the SDK (it decodes as `Unknown`) and says nothing: bytes
    /// on the wire that carry no content, as a keep-alive would.
    pub fn unknown_event() -> Self {
        Self::event("keepAliveFromTheFuture", json!({}))
    }

    /// `messageStart` for the assistant's message.
    pub fn message_start() -> Self {
        Self::event("messageStart", json!({"role": "assistant"}))
    }

    /// A text delta. Text blocks have no start event.
    pub fn text(index: i32, text: &str) -> Self {
        Self::event(
            "contentBlockDelta",
            json!({"contentBlockIndex": index, "delta": {"text": text}}),
        )
    }

    /// `contentBlockStart` of a tool call.
    pub fn tool_start(index: i32, tool_use_id: &str, name: &str) -> Self {
        Self::event(
            "contentBlockStart",
            json!({
                "contentBlockIndex": index,
                "start": {"toolUse": {"toolUseId": tool_use_id, "name": name}},
            }),
        )
    }

    /// A piece of a tool call's input JSON, as text.
    pub fn tool_input(index: i32, partial_json: &str) -> Self {
        Self::event(
            "contentBlockDelta",
            json!({"contentBlockIndex": index, "delta": {"toolUse": {"input": partial_json}}}),
        )
    }

    /// A piece of readable reasoning.
    pub fn reasoning_text(index: i32, text: &str) -> Self {
        Self::reasoning(index, json!({"text": text}))
    }

    /// The signature that ends a reasoning block.
    pub fn reasoning_signature(index: i32, signature: &str) -> Self {
        Self::reasoning(index, json!({"signature": signature}))
    }

    /// Redacted (encrypted) reasoning; blobs travel base64-encoded in JSON.
    pub fn redacted_reasoning(index: i32, data: &[u8]) -> Self {
        Self::reasoning(
            index,
            json!({"redactedContent": aws_smithy_types::base64::encode(data)}),
        )
    }

    fn reasoning(index: i32, delta: Value) -> Self {
        Self::event(
            "contentBlockDelta",
            json!({"contentBlockIndex": index, "delta": {"reasoningContent": delta}}),
        )
    }

    /// `contentBlockStop`.
    pub fn block_stop(index: i32) -> Self {
        Self::event("contentBlockStop", json!({"contentBlockIndex": index}))
    }

    /// `messageStop` with a wire stop reason (`end_turn`, `tool_use`, ...).
    pub fn message_stop(stop_reason: &str) -> Self {
        Self::event("messageStop", json!({"stopReason": stop_reason}))
    }

    /// `metadata` with token usage (cache fields only when non-zero, as Bedrock does) and a
    /// latency metric.
    pub fn metadata(usage: Usage) -> Self {
        let mut tokens = json!({
            "inputTokens": usage.input_tokens,
            "outputTokens": usage.output_tokens,
            "totalTokens": usage.total(),
        });
        if usage.cache_read_tokens > 0 {
            tokens["cacheReadInputTokens"] = json!(usage.cache_read_tokens);
        }
        if usage.cache_write_tokens > 0 {
            tokens["cacheWriteInputTokens"] = json!(usage.cache_write_tokens);
        }
        Self::event(
            "metadata",
            json!({"usage": tokens, "metrics": {"latencyMs": 120}}),
        )
    }

    /// An exception frame, e.g. `throttlingException`, `validationException`.
    pub fn exception(exception_type: &str, message: &str) -> Self {
        Frame::Exception {
            exception_type: exception_type.to_owned(),
            payload: json!({"message": message}),
        }
    }

    /// `modelStreamErrorException` carrying the model's own status and message.
    pub fn model_stream_error(original_status_code: u16, original_message: &str) -> Self {
        Frame::Exception {
            exception_type: "modelStreamErrorException".to_owned(),
            payload: json!({
                "message": "The model stream failed.",
                "originalStatusCode": original_status_code,
                "originalMessage": original_message,
            }),
        }
    }

    /// The frame's bytes on the wire.
    pub fn encode(&self) -> Bytes {
        let (headers, payload) = match self {
            Frame::Event {
                event_type,
                payload,
            } => (
                vec![
                    string_header(":message-type", "event"),
                    string_header(":event-type", event_type),
                    string_header(":content-type", "application/json"),
                ],
                payload,
            ),
            Frame::Exception {
                exception_type,
                payload,
            } => (
                vec![
                    string_header(":message-type", "exception"),
                    string_header(":exception-type", exception_type),
                    string_header(":content-type", "application/json"),
                ],
                payload,
            ),
        };
        let message = Message::new_from_parts(headers, payload.to_string());
        let mut bytes = Vec::new();
        write_message_to(&message, &mut bytes).expect("a well-formed event-stream message");
        bytes.into()
    }
}

fn string_header(name: &'static str, value: &str) -> Header {
    Header::new(name, HeaderValue::String(value.to_owned().into()))
}

/// Bedrock's `p` field: filler of varying length so sizes do not reveal content.
fn padded(mut payload: Value) -> Value {
    const FILLER: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123";
    let len = 1 + payload.to_string().len() % FILLER.len();
    payload["p"] = Value::String(FILLER[..len].to_owned());
    payload
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_eventstream::frame::read_message_from;

    fn header<'a>(message: &'a Message, name: &str) -> &'a str {
        message
            .headers()
            .iter()
            .find(|h| h.name().as_str() == name)
            .and_then(|h| h.value().as_string().ok())
            .map(|s| s.as_str())
            .unwrap_or_else(|| panic!("no {name} header"))
    }

    #[test]
    fn an_event_decodes_back_to_its_headers_and_payload() {
        let bytes = Frame::text(2, "Hi").encode();
        let message = read_message_from(bytes).unwrap();
        assert_eq!(header(&message, ":message-type"), "event");
        assert_eq!(header(&message, ":event-type"), "contentBlockDelta");
        assert_eq!(header(&message, ":content-type"), "application/json");
        let payload: Value = serde_json::from_slice(message.payload()).unwrap();
        assert_eq!(payload["contentBlockIndex"], 2);
        assert_eq!(payload["delta"], json!({"text": "Hi"}));
        assert!(payload["p"].as_str().is_some_and(|p| !p.is_empty()));
    }

    #[test]
    fn an_exception_names_its_type() {
        let message =
            read_message_from(Frame::exception("throttlingException", "slow").encode()).unwrap();
        assert_eq!(header(&message, ":message-type"), "exception");
        assert_eq!(header(&message, ":exception-type"), "throttlingException");
        assert_eq!(
            serde_json::from_slice::<Value>(message.payload()).unwrap(),
            json!({"message": "slow"})
        );
    }

    #[test]
    fn metadata_leaves_out_unused_cache_fields() {
        let Frame::Event { payload, .. } = Frame::metadata(Usage {
            input_tokens: 3,
            output_tokens: 4,
            cache_read_tokens: 5,
            cache_write_tokens: 0,
        }) else {
            panic!()
        };
        assert_eq!(
            payload["usage"],
            json!({"inputTokens": 3, "outputTokens": 4, "totalTokens": 12, "cacheReadInputTokens": 5})
        );
    }
}
