//! The [`MediaStore`] port: where fetched attachments are kept, so the transcript holds a
//! reference ([`MediaRef`]) and never the bytes. Adapters are named after their technology:
//! [`LocalFiles`](super::LocalFiles) for `bridle serve`, [`InMemory`](super::InMemory) for
//! tests, and S3 in its own crate (`media-s3`, linked only by the worker Lambda).

use super::MediaError;
use async_trait::async_trait;
use transcript::MediaRef;

/// An attachment read back from a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMedia {
    pub mime_type: String,
    pub bytes: Vec<u8>,
}

/// A blob store for attachments.
#[async_trait]
pub trait MediaStore: Send + Sync + std::fmt::Debug {
    /// Store `bytes` under `key` (a [`media_key`](super::media_key)); a second put of the same
    /// key overwrites, so a retried job is harmless. The returned reference is what the
    /// transcript keeps (for S3: `s3://bucket/key`, which Amazon Nova on Bedrock reads
    /// directly; other models are sent the bytes, read back with [`MediaStore::get`]).
    async fn put(&self, key: &str, mime_type: &str, bytes: Vec<u8>)
    -> Result<MediaRef, MediaError>;

    /// Read an attachment back by the `key` of the reference `put` returned (or the plain media
    /// key). Unknown → [`MediaError::NotFound`].
    async fn get(&self, key: &str) -> Result<StoredMedia, MediaError>;

    /// The reference `put` returned for the media key `key`, if something is stored there,
    /// without reading the bytes: a retried job uses what an earlier attempt stored instead of
    /// fetching it again (platform links expire; WhatsApp's after five minutes).
    async fn stored(&self, key: &str) -> Result<Option<MediaRef>, MediaError>;
}
