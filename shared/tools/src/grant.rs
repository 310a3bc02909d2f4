//! The sentence a call outside its grant gets, the same wherever it is refused (the registry,
//! the confirmation gate, the transaction helper), so the model can relay it.

use crate::{ToolCall, ToolOutcome};
use serde_json::json;
use transcript::{Grant, Part};

/// Why a call was refused under `grant`, for the model to relay: one calm sentence naming the
/// setting and where the person changes it.
pub fn not_allowed(grant: Grant) -> String {
    let reach = match grant {
        Grant::Read => "this assistant may only read",
        Grant::Write | Grant::Risky => {
            "this assistant may make changes, but not risky ones like this"
        }
    };
    format!(
        "Not allowed by your settings: {reach} (change it in the web app). Nothing was done; \
         tell the user so in one line."
    )
}

/// The tool result of a call refused under `grant` ([`not_allowed`]'s sentence as its error).
pub fn not_allowed_outcome(call: &ToolCall, grant: Grant) -> ToolOutcome {
    ToolOutcome {
        part: Part::ToolResult {
            tool_use_id: call.id.clone(),
            content: json!({ "error": not_allowed(grant) }),
            is_error: true,
        },
        is_error: true,
        effects: None,
    }
}
