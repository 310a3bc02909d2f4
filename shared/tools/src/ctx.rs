use serde::{Deserialize, Serialize};
use std::fmt;
use transcript::{ConversationId, Grant, UserId};

/// Who initiated a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// The user directly (e.g. a button press handled without the model).
    User,
    /// The model, on the user's behalf.
    Agent,
    /// An MCP client, on the user's behalf.
    Mcp,
}

/// Identifies one request's actions, for the audit log and undo.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ActionId(pub String);

impl fmt::Display for ActionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a handler knows about the caller. Built by the harness from authentication; a tool's
/// schema never has a field naming whose data to touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ctx {
    pub user_id: UserId,
    pub actor: Actor,
    pub action_id: ActionId,
    pub conversation_id: ConversationId,
    /// While a model's tool call runs: a key unique to that call and stable across a resumed
    /// turn (conversation, the asking message's position, the call's id). A tool that calls an
    /// outside system passes it as the idempotency key, so a call repeated after a crash is not
    /// done twice there. `None` outside a model's call.
    pub call_key: Option<String>,
    /// The most this call may do: the assistant's grant, read from the account when the turn
    /// started; an MCP token's scope. [`Registry::run`](crate::Registry::run) refuses a tool
    /// that changes things under [`Grant::Read`], and the confirmation gate a risky call under
    /// less than [`Grant::Risky`], each with [`not_allowed`](crate::not_allowed)'s sentence.
    pub grant: Grant,
}
