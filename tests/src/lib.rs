//! Helpers for Bridle's integration tests: a harness that wires the real engine, the real tool
//! runner and a real (in-memory) SQLite store to a `ScriptedModel`; the real local server on a
//! loopback port with an HTTP client; log capture.

pub mod browser;
pub mod budget_turns;
pub mod crash_store;
mod echo_model;
pub mod fake_issuer;
mod flaky_store;
mod harness;
mod keeping_platform;
mod logs;
pub mod mcp_calls;
pub mod moto;
pub mod oidc_provider;
pub mod otlp;
pub mod platform_api;
pub mod program_script;
mod sample_tools;
pub mod server;
pub mod traced_turn;
pub mod twilio;
mod wait;
mod web_jobs;

pub use echo_model::EchoModel;
pub use flaky_store::FlakyStore;
pub use harness::{Harness, Turned};
pub use keeping_platform::KeepingPlatform;
pub use logs::{Capturing, Logs};
pub use sample_tools::{Calls, sample_tools};
pub use wait::eventually;
pub use web_jobs::{web_job, web_jobs};
