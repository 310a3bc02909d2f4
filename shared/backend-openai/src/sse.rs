//! Response bytes → neutral events: SSE framing (`eventsource-stream`: lines split across reads,
//! `\r\n`, `: keep-alive` comments, multi-byte characters split across chunks) feeding the
//! [`OpenAiEventMapper`]; bytes that complete no event become a keep-alive. The client and the
//! tests share this path.

use crate::events::{Mapped, OpenAiEventMapper};
use backend::{BackendError, ModelEvent};
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

/// The neutral events of a Chat Completions response body. Ends after `Done` or the first
/// error (without waiting for the server to close the connection).
///
/// Whenever bytes arrived since the last item but no complete event is ready (a `: ping`
/// comment, half a frame, a chunk with nothing to say), the stream yields
/// [`ModelEvent::KeepAlive`], so the engine's idle timer counts any bytes on the wire.
pub fn sse_events<S, B, E>(body: S) -> impl Stream<Item = Mapped> + Send + 'static
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let bytes_seen = Arc::new(AtomicBool::new(false));
    let seen = bytes_seen.clone();
    let body = body.inspect(move |chunk| {
        if chunk.as_ref().is_ok_and(|b| !b.as_ref().is_empty()) {
            seen.store(true, Ordering::Relaxed);
        }
    });
    let mut state = State {
        frames: Box::pin(body.eventsource()),
        mapper: OpenAiEventMapper::new(),
        pending: VecDeque::new(),
        ended: false,
        bytes_seen,
    };
    futures::stream::poll_fn(move |cx| state.poll_next(cx))
}

/// Every event in a complete recorded response body (tests, replays).
pub fn events_from_sse_bytes(bytes: &[u8]) -> Vec<Mapped> {
    let body = futures::stream::iter([Ok::<_, std::convert::Infallible>(bytes.to_vec())]);
    futures::executor::block_on(sse_events(body).collect())
}

struct State<F> {
    frames: Pin<Box<F>>,
    mapper: OpenAiEventMapper,
    pending: VecDeque<Mapped>,
    ended: bool,
    /// Set by the body whenever a chunk arrives; cleared when an item is yielded.
    bytes_seen: Arc<AtomicBool>,
}

impl<F, E> State<F>
where
    F: Stream<Item = Result<eventsource_stream::Event, EventStreamError<E>>>,
    E: std::error::Error + Send + Sync + 'static,
{
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Mapped>> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                self.bytes_seen.store(false, Ordering::Relaxed);
                return Poll::Ready(Some(item));
            }
            if self.ended || self.mapper.is_complete() {
                return Poll::Ready(None);
            }
            match self.frames.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let mapped = map_frame(&mut self.mapper, &frame.event, &frame.data);
                    self.pending.extend(mapped);
                }
                Poll::Ready(Some(Err(err))) => {
                    self.pending.push_back(Err(framing_error(err)));
                    self.ended = true;
                }
                Poll::Ready(None) => {
                    self.pending.extend(self.mapper.finish());
                    self.ended = true;
                }
                Poll::Pending if self.bytes_seen.swap(false, Ordering::Relaxed) => {
                    return Poll::Ready(Some(Ok(ModelEvent::KeepAlive)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// A frame named `error` (some proxies send `event: error`) is an error even when its data is
/// not an `{"error": ...}` object.
fn map_frame(mapper: &mut OpenAiEventMapper, event: &str, data: &str) -> Vec<Mapped> {
    if event != "error" {
        return mapper.map_data(data);
    }
    let wrapped = match serde_json::from_str::<serde_json::Value>(data) {
        Ok(value) if value.get("error").is_some() => value,
        Ok(value) => serde_json::json!({ "error": value }),
        Err(_) => serde_json::json!({ "error": { "message": data } }),
    };
    mapper.map_data(&wrapped.to_string())
}

fn framing_error<E>(err: EventStreamError<E>) -> BackendError
where
    E: std::error::Error + Send + Sync + 'static,
{
    match err {
        EventStreamError::Transport(source) => BackendError::Transport {
            message: "the response stream broke".into(),
            source: Some(Arc::new(source)),
        },
        EventStreamError::Utf8(source) => BackendError::Transport {
            message: "the response stream is not valid UTF-8".into(),
            source: Some(Arc::new(source)),
        },
        EventStreamError::Parser(err) => {
            BackendError::transport(format!("the response stream is not valid SSE: {err}"))
        }
    }
}
