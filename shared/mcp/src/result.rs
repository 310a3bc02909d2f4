//! A runner outcome as an MCP tool result: text for every client, plus `structuredContent`
//! when the result is a JSON object. Pure.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;
use tools::ToolOutcome;
use transcript::Part;

/// The MCP result of a runner outcome. An error's text is the runner's sentence alone.
pub fn mcp_result(outcome: &ToolOutcome) -> CallToolResult {
    let content = match &outcome.part {
        Part::ToolResult { content, .. } => content.clone(),
        _ => Value::Null,
    };
    if outcome.is_error {
        let text = content
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| content.to_string());
        return refusal(text);
    }
    let text = match &content {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if content.is_object() {
        result.structured_content = Some(content);
    }
    result
}

/// A readable tool error (`isError: true`): the client's model reads `text`.
pub fn refusal(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outcome(content: Value, is_error: bool) -> ToolOutcome {
        ToolOutcome {
            part: Part::ToolResult {
                tool_use_id: "c1".into(),
                content,
                is_error,
            },
            is_error,
            effects: None,
        }
    }

    #[test]
    fn objects_are_text_and_structured() {
        let wire = serde_json::to_value(mcp_result(&outcome(json!({"id": "e1"}), false))).unwrap();
        assert_eq!(wire["content"][0]["text"], r#"{"id":"e1"}"#);
        assert_eq!(wire["structuredContent"], json!({"id": "e1"}));
        assert_eq!(wire["isError"], false);
    }

    #[test]
    fn errors_are_their_sentence() {
        let wire = serde_json::to_value(mcp_result(&outcome(
            json!({"error": "Invalid arguments for x: at /: oops."}),
            true,
        )))
        .unwrap();
        assert_eq!(
            wire["content"][0]["text"],
            "Invalid arguments for x: at /: oops."
        );
        assert_eq!(wire["isError"], true);
        assert!(wire.get("structuredContent").is_none());
    }

    #[test]
    fn a_cut_result_is_plain_text() {
        let wire = serde_json::to_value(mcp_result(&outcome(json!("[truncated]"), false))).unwrap();
        assert_eq!(wire["content"][0]["text"], "[truncated]");
        assert!(wire.get("structuredContent").is_none());
    }
}
