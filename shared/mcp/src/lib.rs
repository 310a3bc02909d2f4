//! MCP for external AI clients (Claude Desktop, an IDE agent, a customer's own agent): the one
//! tool registry served as an MCP server over Streamable HTTP, built on `rmcp`, the official
//! Rust SDK. An MCP client brings its own model; Bridle runs tool calls only, no turn.
//!
//! - [`catalog`]: `tools/list` from the registry's [`MCP_PURPOSE`] catalogue — the same names,
//!   descriptions and JSON Schemas the model sees — with annotations from the tool's flags.
//! - [`handler`]: `tools/call` through the same runner (`Registry::run`): the same validation
//!   and domain errors, generic internal errors with the raw error in the log. The handler
//!   builds the `Ctx` from the token (actor `mcp`, a fresh action id per call, the
//!   conversation `mcp:<token id>`) and checks the token's scope.
//! - [`one_at_a_time`]: the changing calls of all of one owner's tokens take turns (by the
//!   owner's MCP lease), so none is judged by the confirmation policy against a state another
//!   is about to change.
//! - [`confirm`]: a call the confirmation policy calls risky (with a token of the risky scope)
//!   runs only once the token's owner approved exactly that call on Bridle's own page, signed
//!   in: the question kept in the store, the human sent to the page by a URL-mode elicitation
//!   (or by the tool result's sentence, for a client that cannot open one); the client's own
//!   accept approves nothing.
//! - [`approval`]: the page's side — the question shown to its owner, and their answer.
//! - [`auth`]: the bearer-token check in front of `/mcp` (401 with `WWW-Authenticate`), which
//!   puts the token's user and scope in the request's extensions, and the per-user limit of
//!   requests per minute (all the user's tokens together), counted in the store's budget ledger so every instance agrees.
//! - [`token`]: minting (`brd_` + 32 random bytes, base64url) and hashing (SHA-256).
//!
//! Stateless: no session lives in memory between requests, so any instance of the web Lambda
//! answers any request. Depends on the ports (`tools`, `store`, `engine`'s `RiskPolicy`) and
//! `rmcp`/`axum`; never on an adapter, the planner or AWS.

pub mod approval;
pub mod auth;
pub mod catalog;
pub mod confirm;
pub mod handler;
pub mod one_at_a_time;
pub mod result;
pub mod token;

pub use auth::{McpCaller, RateLimit};
pub use handler::{BridleMcp, McpOptions, router};
pub use token::{TOKEN_PREFIX, hash_token, mint_token, new_token_id};

/// The registry purpose of the tools offered over MCP (defined with the registry).
pub use tools::MCP_PURPOSE;
