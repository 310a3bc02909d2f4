//! A job's attachments, made ready for the turn: each is fetched from the platform and kept in
//! the media store under its stable key, and the turn gets the references. A retried job uses
//! what an earlier attempt stored instead of fetching again (platform links expire). An attachment that cannot be read never loses the message: the model
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

/// The media store as a model's adapter reads it ([`backend::MediaSource`]): an attachment's
/// bytes by its reference, for a model that cannot read the reference itself (Anthropic's on
/// Bedrock take no S3 location). One that cannot be read (gone past the bucket's keep, or S3
/// unavailable) is logged, and the model is told of it in a line.
#[derive(Debug, Clone)]
pub struct MediaBytes(pub Arc<dyn MediaStore>);

#[async_trait::async_trait]
impl backend::MediaSource for MediaBytes {
    async fn bytes(&self, media: &MediaRef) -> Option<Vec<u8>> {
        match self.0.get(&media.key).await {
            Ok(stored) => Some(stored.bytes),
            Err(err) => {
                tracing::warn!(key = %media.key, error = %err, "an attachment's bytes could not be read for the model");
                None
            }
        }
    }
}

/// What the turn gets: the stored references, and a note per attachment that failed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    pub refs: Vec<MediaRef>,
    pub notes: Vec<String>,
}

/// The most attachments read from one message (Twilio's MMS carries at most 10, Slack's file
/// share 10; WhatsApp and Telegram one). Each is a download of up to 10 MB, kept in the media
/// store, and fetched before the budget's guard runs (not for a turn that will not run at all,
/// [`turn_refused`], nor one whose budget or rate window is already full, [`NotKept`]), so a
/// message must not ask for more; the rest are named in one note.
pub const MAX_ATTACHMENTS: usize = 10;

/// Why a turn starting from `row` will not run, when it will not: its conversation is not
/// active (an operator took it over: the engine answers nothing) or its account, as read with
/// it, is paused or closed (the account guard's source in every deployment, `StoreAccounts`,
/// answers from that account: every model call is refused). Its attachments are not fetched.
pub fn turn_refused(row: &engine::TurnRead) -> Option<&'static str> {
    if row.conversation.status != transcript::ConversationStatus::Active {
        return Some("conversation_not_active");
    }
    match row.account.as_ref()?.as_ref()?.status {
        store::AccountStatus::Active => None,
        store::AccountStatus::Paused => Some("account_paused"),
        store::AccountStatus::Closed => Some("account_closed"),
    }
}

/// Fetch and store the attachments of `job`, in order, at most [`MAX_ATTACHMENTS`]. `None`:
/// attachments are not set up.
pub async fn prepare(attachments: Option<&Attachments>, job: &TurnJob) -> Prepared {
    let mut prepared = Prepared::default();
    let left_out = job.media.len().saturating_sub(MAX_ATTACHMENTS);
    for (n, m) in job.media.iter().enumerate().take(MAX_ATTACHMENTS) {
        let inbound = InboundMedia {
            reference: m.reference.clone(),
            mime_type: m.mime_type.clone(),
            size_bytes: m.size_bytes,
        };
        let key = media_key(&job.channel, &job.conversation_key, &job.message_id, n);
        let stored = match attachments {
            Some(a) => match a.store.stored(&key).await {
                Ok(Some(earlier)) => {
                    tracing::info!(job = %job.dedupe_key(), attachment = n,
                        "attachment stored by an earlier attempt; not fetched again");
                    Ok(earlier)
                }
                found => {
                    if let Err(e) = found {
                        tracing::warn!(job = %job.dedupe_key(), attachment = n, error = %e,
                            "could not look for an earlier copy; fetching");
                    }
                    a.fetcher
                        .fetch_and_store(a.store.as_ref(), &job.channel, &key, &inbound)
                        .await
                }
            },
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
    if left_out > 0 {
        tracing::warn!(job = %job.dedupe_key(), left_out, "attachments past the limit not read");
        prepared.notes.push(format!(
            "[The user sent {left_out} more attachments that were not read: at most \
             {MAX_ATTACHMENTS} are read from one message.]"
        ));
    }
    prepared
}

/// Why a message's attachments were not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotKept {
    /// The assistant does not answer here now ([`turn_refused`]).
    NotAnswering,
    /// A budget window or the conversation's hourly rate was already full
    /// ([`engine::Engine::refuses_outright`]): the turn is only told so.
    OverALimit,
}

/// What a message whose turn will not run keeps of its attachments: none is fetched, and a
/// note per attachment says it came and was not kept, so the transcript — what an operator
/// who took the conversation over reads, and what the model sees once it answers here again —
/// still shows that something was sent.
pub fn not_kept(job: &TurnJob, because: NotKept) -> Prepared {
    let when = match because {
        NotKept::NotAnswering => "the assistant was not answering here",
        NotKept::OverALimit => "a usage limit was reached",
    };
    let mut notes: Vec<String> = job
        .media
        .iter()
        .take(MAX_ATTACHMENTS)
        .map(|m| {
            format!(
                "[The user sent {} that was not kept: it came while {when}.]",
                kind(&m.mime_type)
            )
        })
        .collect();
    let left_out = job.media.len().saturating_sub(MAX_ATTACHMENTS);
    if left_out > 0 {
        notes.push(format!(
            "[The user sent {left_out} more attachments that were not kept.]"
        ));
    }
    Prepared {
        refs: Vec::new(),
        notes,
    }
}

/// `[The user sent an image that could not be read: it is larger than 10 MB.]`
pub fn note(mime_type: &str, error: &MediaError) -> String {
    format!(
        "[The user sent {} that could not be read: {}.]",
        kind(mime_type),
        error.reason()
    )
}

/// An attachment's kind in words, from its MIME type: "an image", "a file", ….
fn kind(mime_type: &str) -> &'static str {
    let top = mime_type
        .split('/')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match top.as_str() {
        "image" => "an image",
        "audio" => "an audio message",
        "video" => "a video",
        _ => "a file",
    }
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

    #[test]
    fn a_turn_that_will_not_run_is_told_apart() {
        let conversation = transcript::Conversation::new("whatsapp:1", "ann", "whatsapp", "chat");
        let row = |status, account: Option<Option<store::AccountStatus>>| engine::TurnRead {
            conversation: transcript::Conversation {
                status,
                ..conversation.clone()
            },
            account: account.map(|a| {
                a.map(|status| store::Account {
                    status,
                    ..store::Account::new("ann", "Ann")
                })
            }),
            next_visible: None,
            messages: None,
            facts: None,
        };
        use store::AccountStatus as A;
        use transcript::ConversationStatus as C;
        for (status, account, refused) in [
            (C::Active, Some(Some(A::Active)), None),
            (C::Active, None, None),
            (C::Active, Some(None), None),
            (C::Paused, None, Some("conversation_not_active")),
            (
                C::Closed,
                Some(Some(A::Active)),
                Some("conversation_not_active"),
            ),
            (C::Active, Some(Some(A::Paused)), Some("account_paused")),
            (C::Active, Some(Some(A::Closed)), Some("account_closed")),
        ] {
            assert_eq!(
                turn_refused(&row(status, account)),
                refused,
                "{status:?} {account:?}"
            );
        }
    }

    fn job_with_an_image() -> TurnJob {
        TurnJob {
            addressed_to: None,
            trace_context: Default::default(),
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
        }
    }

    #[test]
    fn a_turn_that_will_not_run_notes_each_attachment_and_keeps_none() {
        let mut job = job_with_an_image();
        let p = not_kept(&job, NotKept::NotAnswering);
        assert!(p.refs.is_empty());
        assert_eq!(
            p.notes,
            [
                "[The user sent an image that was not kept: it came while the assistant was not \
              answering here.]"
            ]
        );
        let one = job.media[0].clone();
        job.media = (0..12)
            .map(|i| queue::JobMedia {
                mime_type: if i % 2 == 0 {
                    "application/pdf"
                } else {
                    "image/png"
                }
                .into(),
                ..one.clone()
            })
            .collect();
        let p = not_kept(&job, NotKept::NotAnswering);
        assert_eq!(p.notes.len(), MAX_ATTACHMENTS + 1);
        assert!(p.notes[0].starts_with("[The user sent a file that was not kept"));
        assert_eq!(
            p.notes[MAX_ATTACHMENTS],
            "[The user sent 2 more attachments that were not kept.]"
        );
        assert!(
            not_kept(&job_without_media(), NotKept::NotAnswering)
                .notes
                .is_empty()
        );
        assert_eq!(
            not_kept(&job_with_an_image(), NotKept::OverALimit).notes,
            [
                "[The user sent an image that was not kept: it came while a usage limit was reached.]"
            ]
        );
    }

    fn job_without_media() -> TurnJob {
        TurnJob {
            media: Vec::new(),
            ..job_with_an_image()
        }
    }

    #[tokio::test]
    async fn without_a_media_setup_every_attachment_becomes_a_note() {
        let p = prepare(None, &job_with_an_image()).await;
        assert!(p.refs.is_empty());
        assert_eq!(
            p.notes,
            ["[The user sent an image that could not be read: attachments cannot be read here.]"]
        );
    }

    /// Past `MAX_ATTACHMENTS`, the rest are neither fetched nor used (here all twelve are
    /// stored already, so only the limit keeps the last two out) and one note names them.
    #[tokio::test]
    async fn at_most_ten_attachments_are_read_from_one_message() {
        let mut job = job_with_an_image();
        job.media = vec![job.media[0].clone(); 12];
        let store = Arc::new(channels::media::InMemory::default());
        let mut stored = Vec::new();
        for n in 0..12 {
            let key = media_key(&job.channel, &job.conversation_key, &job.message_id, n);
            stored.push(
                store
                    .put(&key, "image/jpeg", b"jpeg".to_vec())
                    .await
                    .unwrap(),
            );
        }
        let attachments = Attachments {
            fetcher: channels::media::MediaFetcher::new(
                channels::media::PlatformMedia::default(),
                Default::default(),
            ),
            store,
        };
        let p = prepare(Some(&attachments), &job).await;
        assert_eq!(p.refs, stored[..MAX_ATTACHMENTS]);
        assert_eq!(
            p.notes,
            [
                "[The user sent 2 more attachments that were not read: at most 10 are read from \
              one message.]"
            ]
        );
    }

    /// The model's adapter reads an attachment back by the reference the turn got; one not
    /// (or no longer) stored is `None`, so the model is told of it in a line.
    #[tokio::test]
    async fn a_models_adapter_reads_stored_bytes_by_reference() {
        use backend::MediaSource as _;
        let store = Arc::new(channels::media::InMemory::default());
        let stored = store
            .put("media/whatsapp/c1/m1/0", "image/jpeg", b"jpeg".to_vec())
            .await
            .unwrap();
        let source = MediaBytes(store);
        assert_eq!(source.bytes(&stored).await, Some(b"jpeg".to_vec()));
        let gone = MediaRef {
            key: "media/whatsapp/c1/m2/0".into(),
            ..stored
        };
        assert_eq!(source.bytes(&gone).await, None);
    }

    /// The fetcher here can reach no platform: only what is already stored can be used.
    #[tokio::test]
    async fn a_retried_job_uses_what_an_earlier_attempt_stored() {
        let job = job_with_an_image();
        let store = Arc::new(channels::media::InMemory::default());
        let attachments = Attachments {
            fetcher: channels::media::MediaFetcher::new(
                channels::media::PlatformMedia::default(),
                Default::default(),
            ),
            store: store.clone(),
        };
        let first = prepare(Some(&attachments), &job).await;
        assert!(first.refs.is_empty(), "nothing can be fetched: {first:?}");
        assert_eq!(first.notes.len(), 1);

        let key = media_key(&job.channel, &job.conversation_key, &job.message_id, 0);
        let earlier = store
            .put(&key, "image/jpeg", b"jpeg".to_vec())
            .await
            .unwrap();
        let retried = prepare(Some(&attachments), &job).await;
        assert_eq!(
            retried,
            Prepared {
                refs: vec![earlier],
                notes: vec![]
            }
        );
    }
}
