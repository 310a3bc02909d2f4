//! A stream answer → the HTTP response body, byte for byte: frames encoded, damaged where the
//! scenario says, cut into chunks, paced, stalled, or cut off by closing the connection.

use crate::scenario::{Piece, StreamAnswer};
use bytes::{Bytes, BytesMut};
use futures::Stream;
use std::collections::VecDeque;
use std::time::Duration;

/// What the body does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Out {
    Bytes(Bytes),
    Wait(Duration),
    /// Never send anything again.
    Stall,
    /// Fail the body: the server closes the connection mid-response.
    Abort,
}

/// A pause between re-cut chunks, so they leave as separate writes.
const BETWEEN_CHUNKS: Duration = Duration::from_millis(1);

/// A pause before closing the connection, so the bytes before the cut are flushed first.
const BEFORE_ABORT: Duration = Duration::from_millis(20);

/// The body plan for a stream answer.
pub(crate) fn plan(answer: &StreamAnswer) -> Vec<Out> {
    let mut out = Vec::new();
    let mut pending = BytesMut::new();
    let mut frame_no = 0;
    for piece in &answer.pieces {
        match piece {
            Piece::Frame(frame) => {
                let mut bytes = frame.encode().to_vec();
                let index = frame_no;
                frame_no += 1;
                if answer.corrupt_frame == Some(index) {
                    corrupt(&mut bytes);
                }
                if answer.cut_in_frame == Some(index) {
                    pending.extend_from_slice(&bytes[..bytes.len() / 2]);
                    flush(&mut out, &mut pending, answer.chunk_size);
                    // Let what was sent reach the client before the connection goes.
                    out.push(Out::Wait(BEFORE_ABORT));
                    out.push(Out::Abort);
                    return out;
                }
                pending.extend_from_slice(&bytes);
            }
            Piece::Wait(d) => {
                flush(&mut out, &mut pending, answer.chunk_size);
                out.push(Out::Wait(*d));
            }
            Piece::Stall => {
                flush(&mut out, &mut pending, answer.chunk_size);
                out.push(Out::Stall);
                return out;
            }
        }
    }
    flush(&mut out, &mut pending, answer.chunk_size);
    out
}

/// Flip the last payload byte (just before the message CRC), as a bit error in transit would.
fn corrupt(frame: &mut [u8]) {
    let at = frame.len() - 5;
    frame[at] ^= 0x20;
}

fn flush(out: &mut Vec<Out>, pending: &mut BytesMut, chunk_size: Option<usize>) {
    if pending.is_empty() {
        return;
    }
    let bytes = pending.split().freeze();
    match chunk_size {
        None => out.push(Out::Bytes(bytes)),
        Some(size) => {
            for start in (0..bytes.len()).step_by(size) {
                let end = (start + size).min(bytes.len());
                out.push(Out::Bytes(bytes.slice(start..end)));
                out.push(Out::Wait(BETWEEN_CHUNKS));
            }
        }
    }
}

/// The response body playing `plan`.
pub(crate) fn body(plan: Vec<Out>) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::unfold(VecDeque::from(plan), |mut plan| async move {
        loop {
            match plan.pop_front()? {
                Out::Bytes(bytes) => return Some((Ok(bytes), plan)),
                Out::Wait(d) => tokio::time::sleep(d).await,
                Out::Stall => futures::future::pending::<()>().await,
                Out::Abort => {
                    plan.clear();
                    let cut = std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "fake-bedrock closed the connection mid-frame",
                    );
                    return Some((Err(cut), plan));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use aws_smithy_eventstream::frame::read_message_from;

    fn answer(frames: Vec<Frame>) -> StreamAnswer {
        StreamAnswer {
            pieces: frames.into_iter().map(Piece::Frame).collect(),
            chunk_size: None,
            corrupt_frame: None,
            cut_in_frame: None,
        }
    }

    fn bytes_of(plan: &[Out]) -> Vec<u8> {
        plan.iter()
            .filter_map(|o| match o {
                Out::Bytes(b) => Some(b.to_vec()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    fn frames() -> Vec<Frame> {
        vec![
            Frame::message_start(),
            Frame::text(0, "Hi"),
            Frame::block_stop(0),
        ]
    }

    fn whole() -> Vec<u8> {
        frames().iter().flat_map(|f| f.encode().to_vec()).collect()
    }

    #[test]
    fn chunks_ignore_frame_boundaries_and_lose_nothing() {
        let mut a = answer(frames());
        a.chunk_size = Some(7);
        let plan = plan(&a);
        assert_eq!(bytes_of(&plan), whole());
        let sizes: Vec<usize> = plan
            .iter()
            .filter_map(|o| match o {
                Out::Bytes(b) => Some(b.len()),
                _ => None,
            })
            .collect();
        assert!(
            sizes[..sizes.len() - 1].iter().all(|&s| s == 7),
            "{sizes:?}"
        );
    }

    #[test]
    fn a_corrupted_frame_fails_its_checksum() {
        let mut a = answer(frames());
        a.corrupt_frame = Some(1);
        let bytes = bytes_of(&plan(&a));
        let first = frames()[0].encode().len();
        assert!(read_message_from(&bytes[..first]).is_ok());
        let err = read_message_from(&bytes[first..]).unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
    }

    #[test]
    fn a_cut_sends_half_a_frame_then_aborts() {
        let mut a = answer(frames());
        a.cut_in_frame = Some(1);
        let plan = plan(&a);
        let first = frames()[0].encode().len();
        let second = frames()[1].encode().len();
        assert_eq!(bytes_of(&plan).len(), first + second / 2);
        assert_eq!(plan.last(), Some(&Out::Abort));
    }
}
