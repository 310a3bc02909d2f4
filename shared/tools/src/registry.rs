use crate::shape::{Shaped, shape_result};
use crate::{Ctx, RegistryError, ToolDef, ToolError, ToolHandler};
use futures::FutureExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use transcript::Part;

/// How the runner shapes and bounds tool calls.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// Serialised results longer than this many characters are cut, with a visible marker.
    pub result_cap_chars: usize,
    /// A handler that runs longer than this is abandoned with a readable error.
    pub timeout: Duration,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        Self {
            result_cap_chars: 20_000,
            timeout: Duration::from_secs(30),
        }
    }
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// What running one call produced: the result part for the transcript, and side data.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// A [`Part::ToolResult`] answering the call.
    pub part: Part,
    pub is_error: bool,
    /// The `_effects` the handler returned (what the UI should refresh), never shown to the model.
    pub effects: Option<Value>,
}

struct Entry {
    def: ToolDef,
    validator: jsonschema::Validator,
    handler: Arc<dyn ToolHandler>,
}

/// Every tool Bridle offers, with its handler. Built at start-up, then shared read-only.
pub struct Registry {
    tools: BTreeMap<String, Entry>,
    options: RunnerOptions,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("options", &self.options)
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new(RunnerOptions::default())
    }
}

/// The longest offending value quoted back in an invalid call's answer (as JSON).
const QUOTED_VALUE_BYTES: usize = 120;

/// The longest one problem of an invalid call is said.
const PROBLEM_CHARS: usize = 300;

/// The longest unknown tool name quoted back.
const QUOTED_NAME_CHARS: usize = 100;

impl Registry {
    pub fn new(options: RunnerOptions) -> Self {
        Self {
            tools: BTreeMap::new(),
            options,
        }
    }

    /// Add a tool. Its schema is compiled now, so a bad schema fails at start-up, not mid-turn.
    pub fn register(
        &mut self,
        def: ToolDef,
        handler: impl ToolHandler + 'static,
    ) -> Result<(), RegistryError> {
        let name_ok = !def.name.is_empty()
            && def.name.len() <= 64
            && def
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return Err(RegistryError::BadName(def.name));
        }
        if self.tools.contains_key(&def.name) {
            return Err(RegistryError::Duplicate(def.name));
        }
        let bad_schema = |reason: String| RegistryError::BadSchema {
            name: def.name.clone(),
            reason,
        };
        if def.input_schema.get("type") != Some(&json!("object")) {
            return Err(bad_schema(
                "the top level must be {\"type\": \"object\"}".into(),
            ));
        }
        // Compiling checks the schema against its draft's meta-schema first (the builder's
        // default), so a malformed schema fails here with the meta-schema's reason.
        let validator =
            jsonschema::validator_for(&def.input_schema).map_err(|e| bad_schema(e.to_string()))?;
        self.tools.insert(
            def.name.clone(),
            Entry {
                def,
                validator,
                handler: Arc::new(handler),
            },
        );
        Ok(())
    }

    /// The tools offered for `purpose`, sorted by name. The same registry always yields the same
    /// list, byte for byte, so the tool block of a prompt stays cacheable.
    pub fn catalog_for(&self, purpose: &str) -> Vec<&ToolDef> {
        self.tools
            .values()
            .map(|e| &e.def)
            .filter(|d| d.purposes.iter().any(|p| p == purpose))
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.tools.get(name).map(|e| &e.def)
    }

    /// Whether `call` could run for a conversation of `purpose`: `Some(outcome)` is the
    /// readable error an unknown tool or invalid arguments get (the same one [`Registry::run`]
    /// answers with); `None`: the call is well-formed. Nothing runs. Callers that must decide
    /// something about a call before running it (the confirmation gate) check it first, so a
    /// malformed call never gets that far.
    pub fn check(&self, purpose: &str, call: &ToolCall) -> Option<ToolOutcome> {
        self.entry_for(purpose, call).err()
    }

    /// The registered entry for a well-formed call, or the error outcome.
    fn entry_for(&self, purpose: &str, call: &ToolCall) -> Result<&Entry, ToolOutcome> {
        let entry = match self.tools.get(&call.name) {
            Some(e) if e.def.purposes.iter().any(|p| p == purpose) => e,
            _ => {
                let names: Vec<&str> = self
                    .catalog_for(purpose)
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect();
                let name: String = call.name.chars().take(QUOTED_NAME_CHARS).collect();
                let msg = format!(
                    "Unknown tool {name:?}. Available tools: {}.",
                    names.join(", ")
                );
                return Err(self.error(call, msg));
            }
        };
        let problems: Vec<String> = entry
            .validator
            .iter_errors(&call.input)
            .take(10)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".into() } else { at };
                // The offending value is quoted when short; a long one (a model can send a
                // megabyte) is named by its place, so the answer stays the size of the problem.
                let short = serde_json::to_string(e.instance().as_ref())
                    .is_ok_and(|v| v.len() <= QUOTED_VALUE_BYTES);
                let said = match short {
                    true => format!("at {at}: {e}"),
                    false => format!("at {at}: {}", e.masked_with("the value")),
                };
                // Some messages list what the model sent even masked (unexpected keys): each
                // problem is cut to a readable length.
                match said.char_indices().nth(PROBLEM_CHARS) {
                    Some((cut, _)) => format!("{}…", &said[..cut]),
                    None => said,
                }
            })
            .collect();
        if !problems.is_empty() {
            let msg = format!(
                "Invalid arguments for {}: {}. Fix the arguments and call the tool again.",
                call.name,
                problems.join("; ")
            );
            return Err(self.error(call, msg));
        }
        Ok(entry)
    }

    /// The refusal of a known call the grant does not allow (a tool that changes things under
    /// [`Grant::Read`](crate::Grant::Read)), for a caller to answer before anything else looks
    /// at the call: judging whether a change needs a yes can cost a scheduler's dry run, and a
    /// steered model may ask for a hundred it may not make. [`Registry::run`] refuses it too.
    pub fn outside_grant(&self, ctx: &Ctx, call: &ToolCall) -> Option<ToolOutcome> {
        let entry = self.tools.get(&call.name)?;
        (!entry.def.read_only && !ctx.grant.allows_writes()).then(|| {
            tracing::info!(tool = %call.name, action_id = %ctx.action_id, grant = %ctx.grant, "call outside the grant refused");
            crate::not_allowed_outcome(call, ctx.grant)
        })
    }

    /// Run one call for a conversation of `purpose`: look up, validate, check the grant (a tool
    /// that changes things under [`Grant::Read`](crate::Grant::Read) is refused), call, shape.
    /// Never fails: every outcome is a tool result the model can read.
    pub async fn run(&self, ctx: &Ctx, purpose: &str, call: &ToolCall) -> ToolOutcome {
        let entry = match self.entry_for(purpose, call) {
            Ok(entry) => entry,
            Err(invalid) => return invalid,
        };
        // The grant caps calls, not the catalogue: the tool stays offered, the call is refused
        // with a sentence the model can relay.
        if !entry.def.read_only && !ctx.grant.allows_writes() {
            tracing::info!(tool = %call.name, action_id = %ctx.action_id, grant = %ctx.grant, "call outside the grant refused");
            return crate::not_allowed_outcome(call, ctx.grant);
        }

        crate::fault::pause_if_asked(crate::fault::Pause::BeforeCall, &call.name).await;
        let fut = entry.handler.call(ctx, call.input.clone());
        let outcome =
            tokio::time::timeout(self.options.timeout, AssertUnwindSafe(fut).catch_unwind()).await;
        crate::fault::pause_if_asked(crate::fault::Pause::AfterCall, &call.name).await;
        match outcome {
            Ok(Ok(Ok(value))) => self.answer(call, value),
            Ok(Ok(Err(ToolError::Domain { code, message }))) => {
                tracing::info!(tool = %call.name, action_id = %ctx.action_id, %code, "tool declined");
                // Cut to the result cap as results are: a domain error may quote what the
                // model sent.
                let mut message = message;
                if let Some((cut, _)) = message.char_indices().nth(self.options.result_cap_chars) {
                    message.truncate(cut);
                    message.push_str(" [cut short]");
                }
                self.error(call, message)
            }
            Ok(Ok(Err(ToolError::Internal(err)))) => {
                tracing::error!(tool = %call.name, action_id = %ctx.action_id, error = %err, "tool failed");
                self.internal(call)
            }
            Ok(Err(panic)) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".into());
                tracing::error!(tool = %call.name, action_id = %ctx.action_id, panic = %msg, "tool panicked");
                self.internal(call)
            }
            Err(_elapsed) => {
                tracing::error!(tool = %call.name, action_id = %ctx.action_id, timeout = ?self.options.timeout, "tool timed out");
                self.error(
                    call,
                    format!(
                        "The tool {} did not finish in time and was abandoned. It may or may not have taken effect; check before retrying.",
                        call.name
                    ),
                )
            }
        }
    }

    /// The outcome of a call whose handler returned `output`, shaped as [`Registry::run`]
    /// shapes it. A resumed turn answers a call whose effect was committed with its output
    /// (its receipt) through this, so the model sees the bytes an uninterrupted run showed.
    pub fn answer(&self, call: &ToolCall, output: serde_json::Value) -> ToolOutcome {
        let Shaped { content, effects } = shape_result(output, self.options.result_cap_chars);
        ToolOutcome {
            part: Part::ToolResult {
                tool_use_id: call.id.clone(),
                content,
                is_error: false,
            },
            is_error: false,
            effects,
        }
    }

    fn internal(&self, call: &ToolCall) -> ToolOutcome {
        self.error(
            call,
            format!(
                "Internal error in {}. This is not caused by your arguments; do not retry it in this turn.",
                call.name
            ),
        )
    }

    fn error(&self, call: &ToolCall, message: String) -> ToolOutcome {
        ToolOutcome {
            part: Part::ToolResult {
                tool_use_id: call.id.clone(),
                content: json!({ "error": message }),
                is_error: true,
            },
            is_error: true,
            effects: None,
        }
    }
}
