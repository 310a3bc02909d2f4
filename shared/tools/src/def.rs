use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool's catalogue entry: everything the model is told about it, plus policy flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    /// Written for the model: what it does, when to use it, what it returns.
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    /// Conversation purposes this tool is offered for.
    pub purposes: Vec<String>,
    /// True when the tool changes nothing (safe to retry, never needs confirmation).
    pub read_only: bool,
}

impl ToolDef {
    pub fn new(name: &str, description: &str, input_schema: Value) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema,
            purposes: Vec::new(),
            read_only: false,
        }
    }

    /// Offer the tool for these purposes.
    pub fn purposes(mut self, purposes: &[&str]) -> Self {
        self.purposes = purposes.iter().map(|p| (*p).to_owned()).collect();
        self
    }

    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }
}
