//! The I/O: send the converted input with `ConverseStream` (its JSON body written with sorted
//! keys, so identical requests are identical bytes; see `sorted_body`), map a failure before
//! any event, then pull decoded events from the SDK's receiver through the mapper. Deadlines,
//! idle timeouts and the single retry are the engine's job.

use crate::convert::{
    MAX_DOCUMENT_BYTES, MAX_IMAGE_BYTES, Media, into_bedrock, media_to_read, reads_s3_links,
};
use crate::error::{excerpt, from_open_error, from_stream_error};
use crate::events::{BedrockEventMapper, Mapped};
use crate::sorted_body::SortedJsonBody;
use async_trait::async_trait;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::error::DisplayErrorContext;
use aws_sdk_bedrockruntime::types::ConverseStreamOutput;
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use backend::{BackendError, ChatModel, ChatRequest, EventStream, MediaSource, ModelEvent};
use futures::StreamExt;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use transcript::MediaRef;

type Receiver = aws_sdk_bedrockruntime::primitives::event_stream::EventReceiver<
    ConverseStreamOutput,
    ConverseStreamOutputError,
>;

/// A [`ChatModel`] served by Amazon Bedrock's `ConverseStream`.
#[derive(Debug, Clone)]
pub struct BedrockModel {
    client: Client,
    model_id: String,
    /// The configured endpoint override, for log lines.
    endpoint: Option<String>,
    /// Where attachments' bytes are read for a model that does not read their S3 locations.
    media: Option<Arc<dyn MediaSource>>,
    /// The attachments read last, by key, oldest first (see [`BedrockModel::read`]).
    kept: Arc<Mutex<Kept>>,
}

/// Attachments read last, by key, oldest first.
type Kept = VecDeque<(String, Arc<[u8]>)>;

/// The most attachment bytes a model keeps from one call for the next: a turn's tool rounds,
/// and its retry, send the same attachments, which are then read once.
pub const READ_KEPT_BYTES: usize = 24_000_000;

/// The most attachment bytes one request carries: past it, older attachments go as their
/// line. Converse's own cap on a request's size is not stated per model; this keeps a request
/// of the newest five documents and twenty images within what Anthropic's API takes (32 MB).
pub const MAX_REQUEST_MEDIA_BYTES: usize = 20_000_000;

impl BedrockModel {
    /// `model_id` (a model id or inference-profile ARN) is used when a request names no model.
    pub fn new(client: Client, model_id: String) -> Self {
        Self {
            client,
            model_id,
            endpoint: None,
            media: None,
            kept: Arc::default(),
        }
    }

    /// Read attachments' bytes from `source` for a model that does not read their S3
    /// locations (Anthropic's), or whose keys are not in S3: without it, such an attachment
    /// reaches the model as a line naming it.
    pub fn with_media(mut self, source: Arc<dyn MediaSource>) -> Self {
        self.media = Some(source);
        self
    }

    /// How `request`'s attachments go: as S3 locations when the model reads them, else as
    /// bytes read from the media source (the newest that fit: each within Converse's cap for
    /// its kind, all within [`MAX_REQUEST_MEDIA_BYTES`]); one that cannot be read goes as its
    /// line, and the turn goes on.
    async fn media_for(&self, request: &ChatRequest) -> Media {
        let model = if request.model.is_empty() {
            &self.model_id
        } else {
            &request.model
        };
        let mut media = Media {
            s3_links: reads_s3_links(model),
            ..Media::default()
        };
        let Some(source) = &self.media else {
            return media;
        };
        let cap = |m: &MediaRef| match m.mime_type.starts_with("image/") {
            true => MAX_IMAGE_BYTES,
            false => MAX_DOCUMENT_BYTES,
        };
        // Newest first; one whose stored size is already over its cap, or over what is left of
        // the request's, is not read at all.
        let mut known = 0usize;
        let wanted: Vec<MediaRef> = media_to_read(request, &self.model_id)
            .into_iter()
            .filter(|m| {
                let size = usize::try_from(m.size_bytes).unwrap_or(usize::MAX);
                let fits = size <= cap(m) && known + size <= MAX_REQUEST_MEDIA_BYTES;
                if fits {
                    known += size;
                } else {
                    tracing::warn!(key = %m.key, bytes = m.size_bytes, "an attachment is larger than the model takes, or than room is left for; the model is told of it in a line");
                }
                fits
            })
            .collect();
        let read = futures::future::join_all(wanted.iter().map(|m| self.read(source, m))).await;
        let mut total = 0usize;
        for (attachment, bytes) in wanted.iter().zip(read) {
            let Some(bytes) = bytes else {
                tracing::warn!(key = %attachment.key, "an attachment could not be read; the model is told of it in a line");
                continue;
            };
            if bytes.len() > cap(attachment) || total + bytes.len() > MAX_REQUEST_MEDIA_BYTES {
                tracing::warn!(key = %attachment.key, bytes = bytes.len(), "an attachment is larger than the model takes, or than room is left for; the model is told of it in a line");
                continue;
            }
            total += bytes.len();
            self.keep(&attachment.key, &bytes);
            media.bytes.insert(attachment.key.clone(), bytes.to_vec());
        }
        media
    }

    /// Keep `bytes` (sent under `key`) for the next calls, the oldest kept going first past
    /// [`READ_KEPT_BYTES`].
    fn keep(&self, key: &str, bytes: &Arc<[u8]>) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = kept.iter().position(|(k, _)| k == key) {
            // Sent again: the newest kept.
            let entry = kept.remove(at).expect("found just now");
            kept.push_back(entry);
            return;
        }
        kept.push_back((key.to_owned(), bytes.clone()));
        let mut held: usize = kept.iter().map(|(_, b)| b.len()).sum();
        while held > READ_KEPT_BYTES
            && let Some((_, oldest)) = kept.pop_front()
        {
            held -= oldest.len();
        }
    }

    /// `media`'s bytes: from those kept from the last calls (a turn's every model call sends
    /// the same attachments), else from `source`.
    async fn read(&self, source: &Arc<dyn MediaSource>, media: &MediaRef) -> Option<Arc<[u8]>> {
        {
            let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, bytes)) = kept.iter().find(|(key, _)| *key == media.key) {
                return Some(bytes.clone());
            }
        }
        Some(source.bytes(media).await?.into())
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Name the endpoint the client was configured with (an `AWS_ENDPOINT_URL…` override), so
    /// a connection failure's log line says where; without it, the region's endpoint is named.
    pub fn with_endpoint(mut self, endpoint: Option<&str>) -> Self {
        self.endpoint = endpoint.map(str::to_owned);
        self
    }

    /// Where calls go, for the operator's log.
    fn endpoint(&self) -> String {
        match (&self.endpoint, self.client.config().region()) {
            (Some(url), _) => url.clone(),
            (None, Some(region)) => format!("https://bedrock-runtime.{region}.amazonaws.com"),
            (None, None) => "Bedrock (no region configured)".to_owned(),
        }
    }
}

/// A [`BedrockModel`] on [`client_from_env`], naming the configured endpoint in its logs
/// (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, else `AWS_ENDPOINT_URL`, else the region's).
pub async fn model_from_env(model_id: String) -> BedrockModel {
    let shared = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let endpoint = std::env::var("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .or_else(|| shared.endpoint_url().map(str::to_owned));
    BedrockModel::new(client(&shared), model_id).with_endpoint(endpoint.as_deref())
}

/// A Bedrock runtime client configured the standard AWS way: region, credentials and endpoint
/// from the environment and shared config (`AWS_REGION`, `AWS_PROFILE`, the credential chain,
/// `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` or `AWS_ENDPOINT_URL`). For a `main` that has no SDK
/// configuration of its own (the local server); see [`client`].
pub async fn client_from_env() -> Client {
    client(&aws_config::load_defaults(BehaviorVersion::latest()).await)
}

/// A Bedrock runtime client on the SDK configuration `shared` (the worker's: the one its other
/// AWS clients use, with their HTTP client and credentials).
///
/// The SDK's own retries are turned off: the engine decides about retrying (once, only when
/// nothing was streamed, honouring its deadline), and retries at both layers would multiply.
pub fn client(shared: &SdkConfig) -> Client {
    let config = aws_sdk_bedrockruntime::config::Builder::from(shared)
        .retry_config(RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}

#[async_trait]
impl ChatModel for BedrockModel {
    fn name(&self) -> &str {
        "bedrock"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, BackendError> {
        let media = self.media_for(&request).await;
        let input = into_bedrock(&request, &self.model_id, &media)?;
        tracing::debug!(
            model = input.model_id.as_deref().unwrap_or_default(),
            messages = input.messages.as_ref().map_or(0, Vec::len),
            tools = request.tools.len(),
            prompt_cache = request.settings.prompt_cache,
            "opening ConverseStream"
        );
        let started = Instant::now();
        let output = self
            .client
            .converse_stream()
            .set_model_id(input.model_id)
            .set_system(input.system)
            .set_messages(input.messages)
            .set_inference_config(input.inference_config)
            .set_tool_config(input.tool_config)
            .set_additional_model_request_fields(input.additional_model_request_fields)
            .customize()
            .interceptor(SortedJsonBody)
            .send()
            .await
            .map_err(|err| {
                let detail = excerpt(&DisplayErrorContext(&err).to_string());
                let mapped = from_open_error(err, started.elapsed(), &self.endpoint());
                tracing::warn!(kind = mapped.kind(), error = %detail, "ConverseStream failed");
                mapped
            })?;
        Ok(events(output.stream))
    }
}

/// The receiver's events through the mapper, ending after `Done` or the first error.
fn events(receiver: Receiver) -> EventStream {
    let state = (
        receiver,
        BedrockEventMapper::new(),
        VecDeque::<Mapped>::new(),
    );
    futures::stream::unfold(Some(state), |state| async move {
        let (mut receiver, mut mapper, mut ready) = state?;
        loop {
            if let Some(item) = ready.pop_front() {
                let over = mapper.is_complete() && ready.is_empty();
                let next = (!over).then_some((receiver, mapper, ready));
                return Some((item, next));
            }
            if mapper.is_complete() {
                return None;
            }
            let mapped = match receiver.recv().await {
                // A frame with nothing to say (`messageStart`, a block's start, an event newer
                // than this SDK) still shows the stream is alive: the idle timer restarts.
                Ok(Some(event)) => match mapper.map_event(event) {
                    mapped if mapped.is_empty() => vec![Ok(ModelEvent::KeepAlive)],
                    mapped => mapped,
                },
                Ok(None) => mapper.finish(),
                Err(err) => {
                    let detail = excerpt(&DisplayErrorContext(&err).to_string());
                    let mapped = from_stream_error(err);
                    tracing::warn!(kind = mapped.kind(), error = %detail, "ConverseStream broke");
                    mapper.fail(mapped)
                }
            };
            ready.extend(mapped);
        }
    })
    .boxed()
}
