//! Which attachments a model reads as documents, by MIME type (lower case, no parameters):
//! what a backend sends as a document (Bedrock's Converse document formats), and so what a
//! budget estimates by its size. Any other attachment but an image goes to the model as a line
//! naming it. Also what attachments weigh, for the budget's estimate and compaction's threshold
//! alike.

use crate::ChatMessage;
use transcript::{MediaRef, Part};

/// Documents read as they are, as text: Converse's `txt`, `csv`, `html` and `md`.
pub const TEXT_DOCUMENTS: &[&str] = &["text/plain", "text/csv", "text/html", "text/markdown"];

/// Documents read by the text in their file: Converse's `pdf`, `doc`, `docx`, `xls`, `xlsx`.
pub const FILE_DOCUMENTS: &[&str] = &[
    "application/pdf",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.ms-excel",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
];

/// UTF-8 bytes per token used by the estimate. English prose runs at about four characters a
/// token, one byte each; JSON and code at fewer, which the output allowance and the settle
/// step absorb. Bytes rather than characters: scripts whose characters take two to four bytes
/// (Cyrillic, Greek, Chinese, Japanese, emoji) run at about one token per one to three
/// characters, which characters / 4 would undercount by up to four times, and their bytes / 4
/// track.
pub const BYTES_PER_TOKEN: usize = 4;

/// Input tokens one image costs at most, as Bedrock's Claude models bill it: (width × height)
/// / 750, an image being scaled to about 1.15 megapixels first.
pub const IMAGE_TOKENS: usize = 1_600;

/// Input tokens at most one PDF, Word or Excel file is estimated at (about 50 pages of text).
pub const FILE_DOCUMENT_TOKENS: usize = 25_000;

/// What a message's attachments cost beyond their reference (the message's JSON holds only
/// the blob key), in bytes at [`BYTES_PER_TOKEN`]: the provider reads the blob itself, on every
/// call that sends the message. An image: [`IMAGE_TOKENS`]. A text document
/// ([`TEXT_DOCUMENTS`]): its bytes, read as text. A PDF, Word or Excel file
/// ([`FILE_DOCUMENTS`]): half its bytes
/// (its text is what is billed, and compression, fonts and pictures make the file larger than
/// that text), at most [`FILE_DOCUMENT_TOKENS`], so that one large file cannot keep every call
/// of its conversation above a per-minute cap. Anything else (a voice note, a video) goes to
/// the model as a line naming it: nothing more.
pub fn media_bytes(message: &ChatMessage) -> usize {
    message
        .parts
        .iter()
        .map(|part| match part {
            Part::Image(_) => IMAGE_TOKENS * BYTES_PER_TOKEN,
            Part::Document(media) if is(media, TEXT_DOCUMENTS) => size(media),
            Part::Document(media) if is(media, FILE_DOCUMENTS) => {
                (size(media) / 2).min(FILE_DOCUMENT_TOKENS * BYTES_PER_TOKEN)
            }
            _ => 0,
        })
        .sum()
}

fn size(media: &MediaRef) -> usize {
    usize::try_from(media.size_bytes).unwrap_or(usize::MAX)
}

fn is(media: &MediaRef, kinds: &[&str]) -> bool {
    kinds.contains(&media.mime_type.to_ascii_lowercase().as_str())
}
