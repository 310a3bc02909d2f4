//! What the adapter's own tests share: temp files and jobs.

#![allow(dead_code)]

use queue::{Delivery, JobMedia, TurnJob};
use std::path::PathBuf;

/// A unique path in the temp dir; the file and its WAL companions go when it drops.
pub struct TempPath(pub PathBuf);

impl TempPath {
    pub fn new(name: &str) -> Self {
        let file = format!("bridle-queue-{}-{name}.sqlite", std::process::id());
        let path = Self(std::env::temp_dir().join(file));
        path.remove();
        path
    }

    fn remove(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A web message `message_id` in conversation `group`.
pub fn job(group: &str, message_id: &str) -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "web".into(),
        message_id: message_id.into(),
        conversation_key: group.into(),
        external_user_id: "user-1".into(),
        text: format!("message {message_id}"),
        button_id: None,
        media: vec![],
        received_at_ms: 1_700_000_000_000,
    }
}

/// A button press with a photo: every optional field set; same group as [`job`].
pub fn full_job(group: &str, message_id: &str) -> TurnJob {
    TurnJob {
        trace_context: Default::default(),
        button_id: Some("retry".into()),
        media: vec![JobMedia {
            reference: "media/42".into(),
            mime_type: "image/png".into(),
            size_bytes: Some(1234),
        }],
        ..job(group, message_id)
    }
}

/// The message ids delivered, in order.
pub fn ids(deliveries: &[Delivery]) -> Vec<&str> {
    deliveries
        .iter()
        .map(|d| d.job.message_id.as_str())
        .collect()
}
