//! [`InMemory`]: the media store for tests and in-memory servers; nothing survives the process.

use super::{MediaError, MediaStore, StoredMedia, is_media_key};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use transcript::MediaRef;

/// Attachments in a map.
#[derive(Debug, Default)]
pub struct InMemory {
    items: Mutex<HashMap<String, StoredMedia>>,
}

impl InMemory {
    /// The keys stored so far, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.items.lock().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    }
}

#[async_trait]
impl MediaStore for InMemory {
    async fn put(
        &self,
        key: &str,
        mime_type: &str,
        bytes: Vec<u8>,
    ) -> Result<MediaRef, MediaError> {
        if !is_media_key(key) {
            return Err(MediaError::Storage(format!("not a media key: {key:?}")));
        }
        let size_bytes = bytes.len() as u64;
        self.items.lock().unwrap().insert(
            key.to_owned(),
            StoredMedia {
                mime_type: mime_type.to_owned(),
                bytes,
            },
        );
        Ok(MediaRef {
            key: key.to_owned(),
            mime_type: mime_type.to_owned(),
            size_bytes,
        })
    }

    async fn get(&self, key: &str) -> Result<StoredMedia, MediaError> {
        self.items
            .lock()
            .unwrap()
            .get(key)
            .cloned()
            .ok_or(MediaError::NotFound)
    }

    async fn stored(&self, key: &str) -> Result<Option<MediaRef>, MediaError> {
        Ok(self.items.lock().unwrap().get(key).map(|m| MediaRef {
            key: key.to_owned(),
            mime_type: m.mime_type.clone(),
            size_bytes: m.bytes.len() as u64,
        }))
    }
}
