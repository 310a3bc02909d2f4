//! The S3 media store: the [`MediaStore`] port of `channels::media` on `aws-sdk-s3`, for the
//! worker Lambda (`BRIDLE_MEDIA_BUCKET`). An attachment is one object at its media key
//! (`media/<channel>/<conversation>/<message>/<n>`) with its MIME type as the object's
//! `Content-Type`; the reference the transcript keeps is `s3://<bucket>/<key>`, which Bedrock
//! (Amazon Nova's models) reads directly; for any other model the worker reads the object back
//! and sends its bytes (the worker's role may `s3:GetObject` there).
//!
//! A second put of the same key overwrites (a retried job is harmless), and a retried job finds
//! what an earlier attempt stored with one `HeadObject`. A missing object is
//! [`MediaError::NotFound`]; any other failure is [`MediaError::Storage`] with the SDK's error
//! for the log (it carries no credentials). Every call has a deadline ([`CALL_DEADLINE`]).
//!
//! Depends on the `channels` port and `aws-sdk-s3` only; nothing but the worker links it.

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;
use channels::media::{MediaError, MediaStore, StoredMedia, is_media_key};
use std::time::Duration;
use transcript::MediaRef;

/// How long one S3 call may take, upload or download of a capped attachment included.
pub const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// Attachments as objects in one bucket.
#[derive(Debug, Clone)]
pub struct S3MediaStore {
    client: Client,
    bucket: String,
}

impl S3MediaStore {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    /// The reference of `key`: `s3://bucket/key`.
    pub fn reference(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }

    /// The object key of a reference in this bucket (or of a plain media key).
    fn object_key<'a>(&self, key: &'a str) -> Result<&'a str, MediaError> {
        let plain = match key.strip_prefix("s3://") {
            Some(rest) => rest
                .strip_prefix(self.bucket.as_str())
                .and_then(|r| r.strip_prefix('/'))
                .ok_or_else(|| MediaError::Storage(format!("not in this bucket: {key:?}")))?,
            None => key,
        };
        if is_media_key(plain) {
            Ok(plain)
        } else {
            Err(MediaError::Storage(format!("not a media key: {key:?}")))
        }
    }
}

async fn within<T>(operation: &str, call: impl Future<Output = T>) -> Result<T, MediaError> {
    tokio::time::timeout(CALL_DEADLINE, call)
        .await
        .map_err(|_| {
            MediaError::Storage(format!(
                "S3 {operation} did not answer within {CALL_DEADLINE:?}"
            ))
        })
}

#[async_trait]
impl MediaStore for S3MediaStore {
    async fn put(
        &self,
        key: &str,
        mime_type: &str,
        bytes: Vec<u8>,
    ) -> Result<MediaRef, MediaError> {
        let object = self.object_key(key)?;
        let size_bytes = bytes.len() as u64;
        let call = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(object)
            .content_type(mime_type)
            .body(ByteStream::from(bytes))
            .send();
        within("PutObject", call).await?.map_err(|e| {
            MediaError::Storage(format!("S3 PutObject failed: {}", DisplayErrorContext(e)))
        })?;
        Ok(MediaRef {
            key: self.reference(object),
            mime_type: mime_type.to_owned(),
            size_bytes,
        })
    }

    async fn get(&self, key: &str) -> Result<StoredMedia, MediaError> {
        let object = self.object_key(key)?;
        let call = async {
            let output = self
                .client
                .get_object()
                .bucket(&self.bucket)
                .key(object)
                .send()
                .await
                .map_err(|e| {
                    if e.as_service_error().is_some_and(|s| s.is_no_such_key()) {
                        MediaError::NotFound
                    } else {
                        MediaError::Storage(format!(
                            "S3 GetObject failed: {}",
                            DisplayErrorContext(e)
                        ))
                    }
                })?;
            let mime_type = output
                .content_type()
                .unwrap_or("application/octet-stream")
                .to_owned();
            let bytes = output
                .body
                .collect()
                .await
                .map_err(|e| MediaError::Storage(format!("S3 GetObject body failed: {e}")))?;
            Ok(StoredMedia {
                mime_type,
                bytes: bytes.into_bytes().to_vec(),
            })
        };
        within("GetObject", call).await?
    }

    /// One `HeadObject`. The worker's role has no `s3:ListBucket` (by design), and without it
    /// S3 answers a missing key with 403 rather than 404: both read as "not stored". A real
    /// permission problem then shows on the `put` that follows.
    async fn stored(&self, key: &str) -> Result<Option<MediaRef>, MediaError> {
        let object = self.object_key(key)?;
        let call = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(object)
            .send();
        match within("HeadObject", call).await? {
            Ok(head) => Ok(Some(MediaRef {
                key: self.reference(object),
                mime_type: head
                    .content_type()
                    .unwrap_or("application/octet-stream")
                    .to_owned(),
                size_bytes: head.content_length().unwrap_or(0).max(0) as u64,
            })),
            Err(e)
                if matches!(
                    e.raw_response().map(|r| r.status().as_u16()),
                    Some(403 | 404)
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(MediaError::Storage(format!(
                "S3 HeadObject failed: {}",
                DisplayErrorContext(e)
            ))),
        }
    }
}
