//! A job's attachments, made ready for the turn: each is fetched from the platform and kept in
//! the media store under its stable key (a retried job overwrites the same key), and the turn
//! gets the references. An attachment that cannot be read never loses the message: the model
//! gets the user's words plus a short note saying what could not be read and why, and the raw
//! error goes to the log.

use channels::InboundMedia;
use channels::media::{MediaError, MediaFetcher, MediaStore, media_key};
use queue::TurnJob;
use std::sync::Arc;
use transcript::MediaRef;

/// Where attachments come from and where they are kept.
#[derive(Debug, Clone)]
pub struct Attachments {
    pub fetcher: MediaFetcher,
    pub store: Arc<dyn MediaStore>,
}

/// What the turn gets: the stored references, and a note per attachment that failed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    pub refs: Vec<MediaRef>,
    pub notes: Vec<String>,
}

/// Fetch and store every attachment of `job`, in order. `None`: attachments are not set up.
pub async fn prepare(attachments: Option<&Attachments>, job: &TurnJob) -> Prepared {
    let mut prepared = Prepared::default();
    for (n, m) in job.media.iter().enumerate() {
        let inbound = InboundMedia {
            reference: m.reference.clone(),
            mime_type: m.mime_type.clone(),
            size_bytes: m.size_bytes,
        };
        let key = media_key(&job.channel, &job.conversation_key, &job.message_id, n);
        let stored = match attachments {
            Some(a) => {
                a.fetcher
                    .fetch_and_store(a.store.as_ref(), &job.channel, &key, &inbound)
                    .await
            }
            None => Err(MediaError::NotConfigured {
                channel: job.channel.clone(),
            }),
        };
        match stored {
            Ok(r) => prepared.refs.push(r),
            Err(e) => {
                tracing::warn!(job = %job.dedupe_key(), attachment = n, mime_type = %m.mime_type,
                    error = %e, "attachment could not be read; the model is told");
                prepared.notes.push(note(&m.mime_type, &e));
            }
        }
    }
    prepared
}

/// `[The user sent an image that could not be read: it is larger than 10 MB.]`
pub fn note(mime_type: &str, error: &MediaError) -> String {
    let top = mime_type
        .split('/')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let what = match top.as_str() {
        "image" => "an image",
        "audio" => "an audio message",
        "video" => "a video",
        _ => "a file",
    };
    format!(
        "[The user sent {what} that could not be read: {}.]",
        error.reason()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_say_what_and_why_in_plain_words() {
        let big = MediaError::TooLarge {
            limit: 10 * 1024 * 1024,
            seen: "declared 20000000 bytes".into(),
        };
        assert_eq!(
            note("image/jpeg", &big),
            "[The user sent an image that could not be read: it is larger than 10 MB.]"
        );
        assert_eq!(
            note("application/pdf", &MediaError::NotFound),
            "[The user sent a file that could not be read: it is no longer available.]"
        );
        assert_eq!(
            note("audio/ogg", &MediaError::Timeout),
            "[The user sent an audio message that could not be read: it took too long to download.]"
        );
        let raw = MediaError::Transport("tcp connect error 10.0.0.1".into());
        assert!(
            !note("video/mp4", &raw).contains("10.0.0.1"),
            "no raw error"
        );
    }

    #[tokio::test]
    async fn without_a_media_setup_every_attachment_becomes_a_note() {
        let job = TurnJob {
            channel: "whatsapp".into(),
            message_id: "wamid.1".into(),
            conversation_key: "1555".into(),
            external_user_id: "1555".into(),
            text: "see this".into(),
            button_id: None,
            media: vec![queue::JobMedia {
                reference: "123".into(),
                mime_type: "image/jpeg".into(),
                size_bytes: None,
            }],
            received_at_ms: 0,
        };
        let p = prepare(None, &job).await;
        assert!(p.refs.is_empty());
        assert_eq!(
            p.notes,
            ["[The user sent an image that could not be read: attachments cannot be read here.]"]
        );
    }
}
