//! Messaging channels, one module per platform, behind the same two ports:
//!
//! - inbound ([`Channel`]): verify a webhook delivery on its **raw bytes**, constant-time,
//!   before any parsing; then parse it into neutral [`InboundMessage`]s, or say why it is
//!   ignored (not a user message) or what to answer (a platform handshake);
//! - outbound ([`Sender`]): deliver a reply within the platform's rules.
//!
//! The webhook function, the worker and `bridle serve` use these unchanged. For now there is one
//! channel, `generic` (HMAC-signed JSON), so the production path is real end to end; the
//! platforms (WhatsApp, Telegram, Slack, Twilio) follow.
//!
//! Inbound attachments are fetched with size caps and stored by reference in [`media`].
//!
//! Depends on no engine, backend, store or AWS crate (the transcript only for `MediaRef`).

pub mod config;
pub mod generic;
mod inbound;
pub mod link_code;
pub mod media;
pub mod open_chat;
mod outbound;
mod signature;
pub mod slack;
pub mod split;
pub mod telegram;
pub mod twilio;
pub mod whatsapp;

pub use inbound::{
    Channel, ChannelError, Inbound, InboundMedia, InboundMessage, MAX_ID_BYTES, RawRequest,
};
pub use outbound::{Button, Delivered, Outgoing, SendError, Sender};
