//! [`LocalFiles`]: the media store of `bridle serve`, a folder next to the SQLite file. Each
//! attachment is the file `<root>/<key>` with its MIME type beside it in `<key>.mime`; a write
//! goes to a temporary file first and is renamed into place, so a reader never sees half a file.

use super::{MediaError, MediaStore, StoredMedia, is_media_key};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use transcript::MediaRef;

/// Attachments as files under a root folder.
#[derive(Debug, Clone)]
pub struct LocalFiles {
    root: PathBuf,
}

impl LocalFiles {
    /// A store under `root` (created on the first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The folder beside a database file: `./bridle.db` → `./bridle-media`.
    pub fn beside(db: &Path) -> Self {
        let stem = db
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "bridle".into());
        let dir = db.parent().unwrap_or_else(|| Path::new("."));
        Self::new(dir.join(format!("{stem}-media")))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> Result<PathBuf, MediaError> {
        if !is_media_key(key) {
            return Err(MediaError::Storage(format!("not a media key: {key:?}")));
        }
        Ok(self.root.join(key))
    }
}

fn storage(what: &str, e: std::io::Error) -> MediaError {
    MediaError::Storage(format!("{what}: {e}"))
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

#[async_trait]
impl MediaStore for LocalFiles {
    async fn put(
        &self,
        key: &str,
        mime_type: &str,
        bytes: Vec<u8>,
    ) -> Result<MediaRef, MediaError> {
        let path = self.path(key)?;
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| storage("creating the media folder", e))?;
        }
        let size_bytes = bytes.len() as u64;
        for (target, content) in [
            (sibling(&path, ".mime"), mime_type.as_bytes().to_vec()),
            (path.clone(), bytes),
        ] {
            let tmp = sibling(&target, ".tmp");
            tokio::fs::write(&tmp, content)
                .await
                .map_err(|e| storage("writing an attachment", e))?;
            tokio::fs::rename(&tmp, &target)
                .await
                .map_err(|e| storage("moving an attachment into place", e))?;
        }
        Ok(MediaRef {
            key: key.to_owned(),
            mime_type: mime_type.to_owned(),
            size_bytes,
        })
    }

    async fn get(&self, key: &str) -> Result<StoredMedia, MediaError> {
        let path = self.path(key)?;
        let bytes = match tokio::fs::read(&path).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(MediaError::NotFound);
            }
            Err(e) => return Err(storage("reading an attachment", e)),
        };
        let mime_type = tokio::fs::read_to_string(sibling(&path, ".mime"))
            .await
            .unwrap_or_else(|_| "application/octet-stream".into());
        Ok(StoredMedia { mime_type, bytes })
    }

    /// The bytes are moved into place after the MIME type (see `put`): when they are there,
    /// the attachment is whole.
    async fn stored(&self, key: &str) -> Result<Option<MediaRef>, MediaError> {
        let path = self.path(key)?;
        let size_bytes = match tokio::fs::metadata(&path).await {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(storage("looking for an attachment", e)),
        };
        let mime_type = tokio::fs::read_to_string(sibling(&path, ".mime"))
            .await
            .map_err(|e| storage("reading an attachment's type", e))?;
        Ok(Some(MediaRef {
            key: key.to_owned(),
            mime_type,
            size_bytes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::media_key;

    /// A fresh directory for one test's files, removed when dropped (pass or fail).
    fn temp_root(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("bridle-media-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[tokio::test]
    async fn put_then_get_round_trips_and_a_second_put_overwrites() {
        let root = temp_root("rt");
        let store = LocalFiles::new(root.path());
        let key = media_key("whatsapp", "16315551181", "wamid.1", 0);
        let r = store
            .put(&key, "image/jpeg", b"first".to_vec())
            .await
            .unwrap();
        assert_eq!(
            r,
            MediaRef {
                key: key.clone(),
                mime_type: "image/jpeg".into(),
                size_bytes: 5
            }
        );
        assert!(
            root.path().join(&key).is_file(),
            "stored under the root by key"
        );
        store
            .put(&key, "image/png", b"second!".to_vec())
            .await
            .unwrap();
        assert_eq!(
            store.get(&key).await.unwrap(),
            StoredMedia {
                mime_type: "image/png".into(),
                bytes: b"second!".to_vec()
            }
        );
        assert_eq!(
            store.stored(&key).await.unwrap(),
            Some(MediaRef {
                key: key.clone(),
                mime_type: "image/png".into(),
                size_bytes: 7
            }),
            "what is stored is found without reading it"
        );
    }

    #[tokio::test]
    async fn a_missing_key_is_not_found_and_foreign_paths_are_refused() {
        let root = temp_root("missing");
        let store = LocalFiles::new(root.path());
        let missing = media_key("slack", "D1", "D1:1", 0);
        assert!(matches!(
            store.get(&missing).await,
            Err(MediaError::NotFound)
        ));
        assert_eq!(store.stored(&missing).await.unwrap(), None);
        for bad in ["../../etc/passwd", "/etc/passwd", "media/a/../../x/0"] {
            assert!(
                matches!(store.get(bad).await, Err(MediaError::Storage(_))),
                "{bad}"
            );
            assert!(
                store.put(bad, "text/plain", vec![1]).await.is_err(),
                "{bad}"
            );
            assert!(store.stored(bad).await.is_err(), "{bad}");
        }
    }

    #[test]
    fn the_folder_sits_beside_the_database() {
        assert_eq!(
            LocalFiles::beside(Path::new("/var/lib/bridle/bridle.db")).root(),
            Path::new("/var/lib/bridle/bridle-media")
        );
        assert_eq!(
            LocalFiles::beside(Path::new("chat.sqlite")).root(),
            Path::new("chat-media")
        );
    }
}
