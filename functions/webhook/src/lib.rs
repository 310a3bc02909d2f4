//! The webhook function: `POST /webhooks/{channel}` → size cap → signature check on the raw bytes
//! → age check ([`MAX_DELIVERY_AGE`]) → parse → enqueue one [`TurnJob`] per user message → `200`
//! at once. No model call happens here, and this crate links no engine and no backend (small
//! binary, fast cold start).
//!
//! [`Webhook::handle`] is plain data in, plain data out, so the Lambda adapter
//! (`lambda::handle`, feature `lambda`, on by default), the local server (`bridle serve`, which
//! uses this crate without the feature) and the tests share it. Every refusal is mapped to an
//! HTTP status in one place ([`Refusal`]); internals never reach the response.

pub mod config;
#[cfg(feature = "lambda")]
pub mod lambda;
mod refusal;
mod rekey;

pub use refusal::Refusal;
pub use rekey::{Fresh, REKEY_EVERY, ReadAgain};

use channels::{Channel, Inbound, InboundMessage, RawRequest};
use queue::{Enqueued, JobMedia, JobQueue, QueueError, TurnJob};
use rekey::{Channels, Rekey};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tracing::Instrument;

/// Largest webhook body accepted by default (platform payloads are a few KB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 256 * 1024;

/// The oldest delivery accepted, by the platform's own time on its newest message
/// ([`Channel::sent_at_s`]). A redelivery is skipped by its job's claim, which the job path keeps
/// 7 days after the job finished (`channel_jobs::JobOptions::keep_done`); a delivery older than
/// that would find no claim and run again, so it is dropped here — an hour sooner, for the
/// platform's clock and ours to differ. Answered 200, so the platform does not retry it.
pub const MAX_DELIVERY_AGE: Duration = Duration::from_secs(7 * 24 * 3600 - 3600);

/// What the webhook answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl HttpResponse {
    fn json(status: u16, body: String) -> Self {
        Self {
            status,
            content_type: "application/json",
            body,
        }
    }
}

/// The webhook's dependencies, built once per cold start.
pub struct Webhook {
    /// Replaced as a whole when the secrets are read again ([`Webhook::with_rekey`]).
    channels: RwLock<Arc<Channels>>,
    rekey: Option<Rekey>,
    queue: Arc<dyn JobQueue>,
    max_body_bytes: usize,
    max_age: Duration,
    metrics: metrics::Metrics,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("channels", &self.channel_names())
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

/// The media type of the request's `Content-Type` (lower case, parameters dropped), if any.
fn content_type(headers: &[(String, String)]) -> Option<String> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
}

/// The content types a platform's webhook deliveries come in: Twilio posts forms, Slack posts
/// JSON events and form-encoded interactivity payloads, the others JSON.
fn sent_by(channel: &str) -> &'static [&'static str] {
    match channel {
        "twilio" => &["application/x-www-form-urlencoded"],
        "slack" => &["application/json", "application/x-www-form-urlencoded"],
        _ => &["application/json"],
    }
}

/// One incoming HTTP request, raw.
#[derive(Debug, Clone, Copy)]
pub struct Incoming<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// Unix milliseconds: when the request came (the job's `received_at_ms`; timestamp checks
    /// read its seconds).
    pub now_ms: i64,
    /// Where the request was made, as the server in front says ([`RawRequest::origin`]).
    pub origin: Option<&'a str>,
}

impl Webhook {
    pub fn new(
        channels: Vec<Arc<dyn Channel>>,
        queue: Arc<dyn JobQueue>,
        max_body_bytes: usize,
    ) -> Self {
        Self {
            channels: RwLock::new(Arc::new(
                channels.into_iter().map(|c| (c.name(), c)).collect(),
            )),
            rekey: None,
            queue,
            max_body_bytes,
            max_age: MAX_DELIVERY_AGE,
            metrics: metrics::Metrics::default(),
        }
    }

    /// Drop deliveries older than `max_age` instead of [`MAX_DELIVERY_AGE`] (keep it below how
    /// long finished jobs' claims are kept).
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// Send the accepted/rejected metrics (EMF lines) to `metrics` instead of stdout.
    pub fn with_metrics(mut self, metrics: metrics::Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// When a delivery's signature fails, read the signing secrets again with `read` and check
    /// once more (at most once per [`REKEY_EVERY`]; see `rekey.rs`): a secret rotated while this
    /// instance runs is taken up without a restart.
    pub fn with_rekey(mut self, read: ReadAgain) -> Self {
        self.rekey = Some(Rekey::new(read));
        self
    }

    /// The channels as they are now.
    fn channels(&self) -> Arc<Channels> {
        self.channels
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The names of the channels that are on.
    pub fn channel_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.channels().keys().copied().collect();
        names.sort_unstable();
        names
    }

    /// Verify, parse and enqueue one delivery.
    pub async fn handle(&self, req: Incoming<'_>) -> HttpResponse {
        // The trace of each message starts here; its job carries it to the worker.
        let span = tracing::info_span!("webhook", otel.kind = "server", http.route = %req.path);
        match self.accept(req).instrument(span).await {
            Ok(response) => response,
            Err(refusal) => {
                refusal.log();
                self.metrics.webhook_rejected(refusal.reason());
                refusal.response()
            }
        }
    }

    async fn accept(&self, req: Incoming<'_>) -> Result<HttpResponse, Refusal> {
        let name = req
            .path
            .strip_prefix("/webhooks/")
            .filter(|n| !n.is_empty() && !n.contains('/'))
            .ok_or(Refusal::NoRoute)?;
        let channel = self.channels().get(name).ok_or(Refusal::NoRoute)?.clone();
        let allowed = match req.method {
            "POST" => true,
            "GET" => channel.accepts_get(),
            _ => false,
        };
        if !allowed {
            return Err(Refusal::MethodNotAllowed);
        }
        if req.body.len() > self.max_body_bytes {
            return Err(Refusal::TooLarge {
                limit: self.max_body_bytes,
            });
        }
        if req.method == "POST"
            && let Some(given) = content_type(req.headers)
            && !sent_by(channel.name()).contains(&given.as_str())
        {
            return Err(Refusal::WrongContentType {
                channel: channel.name(),
                given,
            });
        }
        let raw = RawRequest {
            method: req.method,
            path: req.path,
            query: req.query,
            headers: req.headers,
            body: req.body,
            origin: req.origin,
        };
        let channel = match channel.verify(&raw, req.now_ms.div_euclid(1000)) {
            Ok(()) => channel,
            Err(source) => self
                .verify_rekeyed(name, &channel, &raw, req.now_ms)
                .await
                .ok_or(Refusal::Unverified {
                    channel: channel.name(),
                    source,
                })?,
        };
        let sent_s = channel.sent_at_s(&raw);
        // When a message was sent, as near as is known: the platform's own time on it (to the
        // second) where it is earlier than now. A delivery the platform sends again after a
        // failure (a 5xx, a timeout) comes later than it was sent, and a "yes" typed before
        // the question it answers must not pass for one typed after it.
        let dated = |sent_s: Option<i64>| {
            sent_s.map_or(req.now_ms, |s| {
                req.now_ms.min(s.saturating_add(1).saturating_mul(1000))
            })
        };
        if let Some(sent_s) = sent_s {
            let age_s = req.now_ms.div_euclid(1000).saturating_sub(sent_s);
            if age_s > self.max_age.as_secs() as i64 {
                tracing::warn!(
                    channel = channel.name(),
                    age_s,
                    max_age_s = self.max_age.as_secs(),
                    "delivery dropped: its message is older than duplicates are remembered (a replay, or a platform retrying for days)"
                );
                self.metrics.webhook_rejected("too_old");
                return Ok(acknowledge(channel.as_ref(), || {
                    r#"{"status":"ignored"}"#.to_owned()
                }));
            }
        }
        let inbound = channel.parse(&raw).map_err(|e| Refusal::Malformed {
            channel: channel.name(),
            source: e,
        })?;
        match inbound {
            Inbound::Challenge(body) => Ok(HttpResponse {
                status: 200,
                content_type: "text/plain",
                body,
            }),
            Inbound::Ignored { reason } => {
                tracing::info!(channel = channel.name(), reason, "delivery ignored");
                Ok(acknowledge(channel.as_ref(), || {
                    r#"{"status":"ignored"}"#.to_owned()
                }))
            }
            Inbound::Messages(messages) => {
                // A message with an over-long id is dropped, not the delivery: refused, a
                // batch would come again for days, its other messages never queued.
                let total = messages.len();
                let messages: Vec<InboundMessage> = messages
                    .into_iter()
                    .filter(|m| match m.oversized_id() {
                        Some(name) => {
                            tracing::warn!(
                                channel = channel.name(),
                                field = name,
                                max = channels::MAX_ID_BYTES,
                                "a message with an over-long id dropped"
                            );
                            false
                        }
                        None => true,
                    })
                    .collect();
                if messages.is_empty() {
                    return Err(Refusal::Malformed {
                        channel: channel.name(),
                        source: channels::ChannelError::Malformed(format!(
                            "every message's id is longer than {} bytes ({total})",
                            channels::MAX_ID_BYTES
                        )),
                    });
                }
                let (mut queued, mut refused) = (0, 0);
                // Each message by its own time (a batch's messages were sent apart).
                let sent_at = channel.sent_at_each(&raw, &messages);
                let sent_at = sent_at.into_iter().chain(std::iter::repeat(None));
                for (message, sent_s) in messages.into_iter().zip(sent_at) {
                    let mut job = turn_job(message, dated(sent_s));
                    let span = tracing::info_span!(
                        "enqueue",
                        otel.kind = "producer",
                        messaging.operation.type = "send",
                        channel = %job.channel,
                    );
                    job.trace_context = span.in_scope(telemetry::inject_current);
                    match self.queue.enqueue(&job).instrument(span).await {
                        Ok(Enqueued::Accepted) => queued += 1,
                        Ok(Enqueued::Duplicate) => {
                            tracing::info!(job = %job.dedupe_key(), "duplicate delivery dropped")
                        }
                        // The queue will never take this message (SQS: too large): a 500
                        // would have the platform send it again for days, and Telegram hold
                        // back every later update meanwhile. The operator hears of it.
                        Err(QueueError::Rejected { reason }) => {
                            tracing::error!(
                                channel = channel.name(),
                                job = %job.dedupe_key(),
                                text_bytes = job.text.len(),
                                reason,
                                "message dropped: the queue refuses it, and would on every retry"
                            );
                            self.metrics.webhook_rejected("queue_refused");
                            refused += 1;
                        }
                        Err(e) => return Err(Refusal::QueueFailed(e)),
                    }
                }
                self.metrics.webhook_accepted(channel.name(), queued);
                Ok(acknowledge(channel.as_ref(), || match refused {
                    0 => format!(r#"{{"count":{queued},"status":"queued"}}"#),
                    _ => format!(r#"{{"count":{queued},"refused":{refused},"status":"refused"}}"#),
                }))
            }
        }
    }
}

impl Webhook {
    /// After `used` refused `raw`'s signature: the channel `name` as the secrets hold it now,
    /// if that one verifies it — one another request read since, or, at most once per
    /// [`REKEY_EVERY`], one read now (then every channel is replaced by what was read).
    async fn verify_rekeyed(
        &self,
        name: &str,
        used: &Arc<dyn Channel>,
        raw: &RawRequest<'_>,
        now_ms: i64,
    ) -> Option<Arc<dyn Channel>> {
        let rekey = self.rekey.as_ref()?;
        let now_s = now_ms.div_euclid(1000);
        if let Some(newer) = self
            .channels()
            .get(name)
            .filter(|current| !Arc::ptr_eq(current, used))
            && newer.verify(raw, now_s).is_ok()
        {
            return Some(newer.clone());
        }
        let fresh = rekey.read(now_ms).await?;
        let channel = fresh.get(name).cloned();
        *self
            .channels
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(fresh);
        channel.filter(|c| c.verify(raw, now_s).is_ok())
    }
}

/// The 200 a platform expects: its own acknowledgement body if it has one, else the JSON
/// `body` makes.
fn acknowledge(channel: &dyn Channel, body: impl FnOnce() -> String) -> HttpResponse {
    match channel.acknowledgement() {
        Some((content_type, ack)) => HttpResponse {
            status: 200,
            content_type,
            body: ack.to_owned(),
        },
        None => HttpResponse::json(200, body()),
    }
}

/// The job for one inbound message.
pub fn turn_job(m: InboundMessage, now_ms: i64) -> TurnJob {
    TurnJob {
        addressed_to: m.addressed_to,
        trace_context: Default::default(),
        channel: m.channel,
        message_id: m.message_id,
        conversation_key: m.conversation_key,
        external_user_id: m.external_user_id,
        text: m.text,
        button_id: m.button_id,
        media: m
            .media
            .into_iter()
            .map(|m| JobMedia {
                reference: m.reference,
                mime_type: m.mime_type,
                size_bytes: m.size_bytes,
            })
            .collect(),
        received_at_ms: now_ms,
    }
}
