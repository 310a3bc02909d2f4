//! A fake Amazon Bedrock runtime for tests: a local HTTP server that answers
//! `POST /model/{modelId}/converse-stream` in the real `application/vnd.amazon.eventstream`
//! framing (encoded with `aws-smithy-eventstream`), so the real AWS SDK client can be pointed at
//! it with an endpoint URL and dummy credentials.
//!
//! It is test infrastructure, but real code: each request gets the next [`Scenario`], which is
//! either the stream Bedrock would send for a scripted [`backend::Reply`] (the same scripts the
//! scripted model plays), raw [`Frame`]s, an HTTP error (429 `ThrottlingException`, 400
//! `ValidationException`, ...), or a stream damaged on the way: cut into HTTP chunks at
//! arbitrary byte boundaries, with a corrupted CRC, or cut off mid-frame by a closed connection.
//! Every request is recorded ([`RecordedRequest`]: path, headers, JSON body) for assertions.
//! It does not check signatures.
//!
//! One concept per file: `frame` encodes one message, `reply` turns a scripted reply into
//! frames, `scenario` says what to answer, `delivery` turns that into body bytes (chunked,
//! damaged, paced), `server` serves it and records requests.
//!
//! Depends on `backend` (for the script types) and the event-stream codec; never on an adapter,
//! the engine or a store.

mod delivery;
mod frame;
mod reply;
mod scenario;
mod server;

pub use frame::Frame;
pub use scenario::Scenario;
pub use server::{FakeBedrock, RecordedRequest, S3_LINKS_REFUSED_MESSAGE};
