//! Where an adapter reads an attachment's bytes. The transcript keeps a reference to each
//! attachment ([`MediaRef`]), never its bytes; a provider that cannot read the reference
//! itself (Anthropic's models on Bedrock take no S3 location, and nothing outside this process
//! reads a local file) is sent the bytes, read through this port when the request is sent.

use async_trait::async_trait;
use transcript::MediaRef;

/// A store of attachments, as an adapter reads them.
#[async_trait]
pub trait MediaSource: Send + Sync + std::fmt::Debug {
    /// The bytes of the attachment `media` refers to; `None` when they cannot be read (gone,
    /// past the store's keep, or the store unavailable): the model is then told the attachment
    /// in a line instead, and the conversation goes on.
    async fn bytes(&self, media: &MediaRef) -> Option<Vec<u8>>;
}
