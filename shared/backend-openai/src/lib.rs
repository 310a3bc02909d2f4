//! OpenAI-compatible Chat Completions adapter for the [`ChatModel`](backend::ChatModel) port.
//!
//! It speaks the streaming (`stream: true`, server-sent events) Chat Completions API with tools,
//! as served by OpenAI and by local or self-hosted servers (llama.cpp, vLLM, Ollama, LiteLLM).
//! The wire work is pure and lives apart from I/O: [`into_openai`] builds the request body,
//! [`OpenAiEventMapper`] turns each SSE `data:` payload into neutral [`ModelEvent`]s, and
//! [`sse_events`] frames a byte stream with `eventsource-stream` and feeds the mapper. Only
//! [`OpenAiModel`] touches the network (reqwest). Errors are the port's own [`BackendError`];
//! this crate adds no error enum.
//!
//! Depends on `backend` and `transcript` (plus reqwest and SSE framing). It must never depend on
//! the engine, a store, or any AWS or Lambda crate. It reads no environment variables: the caller
//! builds an [`OpenAiConfig`] (typically from `OPENAI_BASE_URL`, `OPENAI_API_KEY`,
//! `OPENAI_MODEL`).
//!
//! [`ModelEvent`]: backend::ModelEvent
//! [`BackendError`]: backend::BackendError

mod client;
mod completion;
mod convert;
mod error;
mod events;
mod sse;

pub use client::{OpenAiConfig, OpenAiModel};
pub use completion::events_from_completion;
pub use convert::into_openai;
pub use events::OpenAiEventMapper;
pub use sse::{events_from_sse_bytes, sse_events};
