//! Amazon Bedrock adapter for the [`ChatModel`](backend::ChatModel) port, over the streaming
//! Converse API (`ConverseStream`) with tools, reasoning and prompt-cache usage.
//!
//! The wire work is pure and lives apart from I/O: [`into_bedrock`] builds the SDK's
//! `ConverseStreamInput` from a neutral request, [`BedrockEventMapper`] turns each decoded stream
//! event into neutral [`ModelEvent`]s, and [`to_document`]/[`from_document`] convert JSON values
//! to and from Smithy documents; [`cache_points_for`] says where a model takes prompt-cache
//! points. Only [`BedrockModel`] touches the network, through
//! `aws-sdk-bedrockruntime`, which also does the signing and the event-stream framing (an
//! interceptor writes the JSON body with sorted keys, so equal requests are equal bytes). SDK
//! failures become the port's own [`BackendError`]; this crate adds no error enum.
//!
//! Depends on `backend` and `transcript` (plus the AWS SDK). It must never depend on the engine
//! or a store. It reads no environment itself except through [`client_from_env`], the standard
//! AWS configuration chain, meant for `main` ([`client`] takes a configuration `main` already
//! has); tests build the client against a local fake.
//!
//! [`ModelEvent`]: backend::ModelEvent
//! [`BackendError`]: backend::BackendError

mod cache;
mod client;
mod convert;
mod document;
mod error;
mod events;
mod sorted_body;

pub use cache::{CachePoints, MAX_CACHE_POINTS, cache_points_for};
pub use client::{BedrockModel, MAX_REQUEST_MEDIA_BYTES, client, client_from_env, model_from_env};
pub use convert::{
    MAX_DOCUMENT_BYTES, MAX_IMAGE_BYTES, Media, into_bedrock, media_to_read, reads_s3_links,
};
pub use document::{from_document, to_document};
pub use events::{BedrockEventMapper, Mapped};
