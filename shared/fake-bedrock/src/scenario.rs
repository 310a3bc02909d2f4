//! What the fake answers to one request: an event stream (scripted from a [`Reply`], or raw
//! frames), possibly damaged on the way, or an HTTP error before any event.

use crate::frame::Frame;
use crate::reply::{
    CONTEXT_TOO_LONG_MESSAGE, REASONING_REJECTED_MESSAGE, estimated_usage,
    feature_rejected_message, pieces,
};
use backend::{BackendError, Reply, Usage};
use std::time::Duration;

/// One step of a stream as sent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    Frame(Frame),
    /// Send nothing for this long.
    Wait(Duration),
    /// Send nothing ever again, keeping the connection open.
    Stall,
}

/// The answer to one `ConverseStream` request.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub(crate) answer: Answer,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    Stream(StreamAnswer),
    Http {
        status: u16,
        error_type: String,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StreamAnswer {
    pub pieces: Vec<Piece>,
    /// Re-cut the bytes into HTTP chunks of this many bytes, ignoring frame boundaries.
    pub chunk_size: Option<usize>,
    /// Flip one payload byte of this frame (counting frames from 0), so its CRC fails.
    pub corrupt_frame: Option<usize>,
    /// Close the connection halfway through this frame.
    pub cut_in_frame: Option<usize>,
}

impl Scenario {
    /// The stream Bedrock would send for `reply`, with the usage the scripted model would
    /// report (10 input tokens, one output token per text piece, five per tool call).
    pub fn reply(reply: &Reply) -> Self {
        Self::reply_with_usage(reply, estimated_usage(reply))
    }

    /// The stream for `reply`, its `metadata` reporting `usage`.
    pub fn reply_with_usage(reply: &Reply, usage: Usage) -> Self {
        Self::stream(pieces(reply, usage))
    }

    /// Exactly these frames, in order (for streams a reply cannot express: interleaved blocks,
    /// malformed tool input, a missing `messageStop`, ...).
    pub fn frames(frames: impl IntoIterator<Item = Frame>) -> Self {
        Self::stream(frames.into_iter().map(Piece::Frame).collect())
    }

    fn stream(pieces: Vec<Piece>) -> Self {
        Scenario {
            answer: Answer::Stream(StreamAnswer {
                pieces,
                chunk_size: None,
                corrupt_frame: None,
                cut_in_frame: None,
            }),
        }
    }

    /// An HTTP error before any event, the way Bedrock sends it: the status, an
    /// `x-amzn-errortype` header naming `error_type`, and `{"message": ...}`.
    pub fn http_error(status: u16, error_type: &str, message: &str) -> Self {
        Scenario {
            answer: Answer::Http {
                status,
                error_type: error_type.to_owned(),
                message: message.to_owned(),
            },
        }
    }

    /// HTTP 429 `ThrottlingException`.
    pub fn throttled() -> Self {
        Self::http_error(
            429,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        )
    }

    /// HTTP 400 `ValidationException` with this message.
    pub fn validation_error(message: &str) -> Self {
        Self::http_error(400, "ValidationException", message)
    }

    /// HTTP 403 `AccessDeniedException` with this message.
    pub fn access_denied(message: &str) -> Self {
        Self::http_error(403, "AccessDeniedException", message)
    }

    /// The HTTP error Bedrock would answer for a call failing with `err` before streaming
    /// (what [`Reply::error`] scripts for the scripted model).
    pub fn open_error(err: &BackendError) -> Self {
        match err {
            BackendError::Throttled { .. } => Self::throttled(),
            BackendError::Overloaded => Self::http_error(
                503,
                "ServiceUnavailableException",
                "Bedrock is unable to process your request.",
            ),
            BackendError::Timeout { .. } => Self::http_error(
                408,
                "ModelTimeoutException",
                "Model has timed out in processing the request.",
            ),
            BackendError::ContextTooLong => Self::validation_error(CONTEXT_TOO_LONG_MESSAGE),
            BackendError::ReasoningRejected { .. } => {
                Self::validation_error(REASONING_REJECTED_MESSAGE)
            }
            BackendError::FeatureRejected { feature, .. } => {
                Self::validation_error(feature_rejected_message(*feature))
            }
            BackendError::InvalidRequest { message } => Self::validation_error(message),
            BackendError::Auth { .. } => Self::http_error(
                403,
                "AccessDeniedException",
                "You don't have access to the model with the specified model ID.",
            ),
            BackendError::Transport { .. } | BackendError::Unreachable { .. } => Self::http_error(
                500,
                "InternalServerException",
                "The server encountered an internal error.",
            ),
        }
    }

    /// Deliver the stream in HTTP chunks of `size` bytes, cut with no regard for frame
    /// boundaries (a frame spans chunks, a chunk ends one frame and starts the next).
    pub fn in_chunks_of(self, size: usize) -> Self {
        self.with_stream(|s| s.chunk_size = Some(size.max(1)))
    }

    /// Flip one payload byte of frame `index` (from 0) in transit: its message CRC fails.
    pub fn corrupt_frame(self, index: usize) -> Self {
        self.with_stream(|s| s.corrupt_frame = Some(index))
    }

    /// Send half of frame `index` (from 0), then close the connection.
    pub fn cut_in_frame(self, index: usize) -> Self {
        self.with_stream(|s| s.cut_in_frame = Some(index))
    }

    fn with_stream(mut self, change: impl FnOnce(&mut StreamAnswer)) -> Self {
        match &mut self.answer {
            Answer::Stream(stream) => change(stream),
            Answer::Http { .. } => panic!("an HTTP error scenario has no stream to change"),
        }
        self
    }
}
