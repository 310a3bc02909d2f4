//! One tool registry: each tool's catalogue entry (name, description written for the model,
//! JSON Schema, purposes, read-only flag) and its handler, held once and used everywhere — to
//! build the model's tool list, to validate arguments, and later to serve MCP.
//!
//! The [`Registry::run`] runner turns every outcome into a tool result the model can read:
//! invalid arguments say what was wrong, a domain failure says what the service said, and
//! anything else (a bug, a panic) becomes a generic "internal error" while the raw error goes to
//! the log with the tool name and action id.
//!
//! Handlers get a [`Ctx`] built by the caller from authentication, never from model output.
//! Depends on `transcript` only (plus a JSON Schema validator). Never on AWS, Lambda or stores.

mod ctx;
mod def;
mod error;
mod fault;
mod grant;
mod handler;
mod numbers;
mod registry;
mod shape;

pub use ctx::{ActionId, Actor, Ctx};
pub use def::ToolDef;
pub use error::{RegistryError, ToolError};
pub use fault::{FAULT_PAUSE_VAR, PAUSED};
pub use grant::{not_allowed, not_allowed_outcome};
pub use handler::{ToolHandler, handler_fn};
pub use numbers::whole_numbers;
pub use registry::{Registry, RunnerOptions, ToolCall, ToolOutcome};
pub use transcript::Grant;

/// The purpose of the tools offered to external AI clients over MCP: a deployment registers a
/// tool for it unless the tool only makes sense inside a conversation (focus, reactions).
pub const MCP_PURPOSE: &str = "mcp";
