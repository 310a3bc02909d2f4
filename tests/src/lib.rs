//! Helpers for Bridle's integration tests: a harness that wires the real engine, the real tool
//! runner and a real (in-memory) SQLite store to a [`ScriptedModel`], plus log capture.

mod harness;
mod logs;
mod sample_tools;

pub use harness::{Harness, Turned};
pub use logs::{Capturing, Logs};
pub use sample_tools::{Calls, sample_tools};
