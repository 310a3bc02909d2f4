//! Response bytes → neutral events: SSE framing (`eventsource-stream`: lines split across reads,
//! `\r\n`, `: keep-alive` comments, multi-byte characters split across chunks) feeding the
//! [`OpenAiEventMapper`]. The client and the tests share this path.

use crate::events::{Mapped, OpenAiEventMapper};
use backend::BackendError;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use std::collections::VecDeque;
use std::sync::Arc;

/// The neutral events of a Chat Completions response body. Ends after `Done` or the first
/// error (without waiting for the server to close the connection).
pub fn sse_events<S, B, E>(body: S) -> impl Stream<Item = Mapped> + Send + 'static
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let state = State {
        frames: Box::pin(body.eventsource()),
        mapper: OpenAiEventMapper::new(),
        pending: VecDeque::new(),
        ended: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.pending.pop_front() {
                return Some((item, state));
            }
            if state.ended || state.mapper.is_complete() {
                return None;
            }
            match state.frames.next().await {
                Some(Ok(frame)) => {
                    let mapped = map_frame(&mut state.mapper, &frame.event, &frame.data);
                    state.pending.extend(mapped);
                }
                Some(Err(err)) => {
                    state.pending.push_back(Err(framing_error(err)));
                    state.ended = true;
                }
                None => {
                    state.pending.extend(state.mapper.finish());
                    state.ended = true;
                }
            }
        }
    })
}

/// Every event in a complete recorded response body (tests, replays).
pub fn events_from_sse_bytes(bytes: &[u8]) -> Vec<Mapped> {
    let body = futures::stream::iter([Ok::<_, std::convert::Infallible>(bytes.to_vec())]);
    futures::executor::block_on(sse_events(body).collect())
}

struct State<F> {
    frames: std::pin::Pin<Box<F>>,
    mapper: OpenAiEventMapper,
    pending: VecDeque<Mapped>,
    ended: bool,
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
