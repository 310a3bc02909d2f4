//! The reservation size of a call: its input estimated from the request, plus an output
//! allowance.

use backend::{ChatMessage, ChatRequest};
use transcript::{MediaRef, Part, json_bytes};

/// UTF-8 bytes per token used by the estimate. English prose runs at about four characters a
/// token, one byte each; JSON and code at fewer, which the output allowance and the settle
/// step absorb. Bytes rather than characters: scripts whose characters take two to four bytes
/// (Cyrillic, Greek, Chinese, Japanese, emoji) run at about one token per one to three
/// characters, which characters / 4 would undercount by up to four times, and their bytes / 4
/// track.
pub const BYTES_PER_TOKEN: usize = 4;

/// Input tokens a request will probably cost: the UTF-8 bytes of the system prompt, the
/// messages (as their JSON, and their attachments by [`media_bytes`]) and the tool catalogue,
/// divided by [`BYTES_PER_TOKEN`], rounded up. Cache reads are not guessed: they are counted
/// as input, which only over-reserves.
pub fn estimate_input_tokens(request: &ChatRequest) -> u64 {
    let media: usize = request.messages.iter().map(media_bytes).sum();
    let bytes =
        request.system.len() + json_bytes(&request.messages) + media + json_bytes(&*request.tools);
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

/// Input tokens one image costs at most, as Bedrock's Claude models bill it: (width × height)
/// / 750, an image being scaled to about 1.15 megapixels first.
pub const IMAGE_TOKENS: usize = 1_600;

/// Input tokens at most one PDF, Word or Excel file is estimated at (about 50 pages of text).
pub const FILE_DOCUMENT_TOKENS: usize = 25_000;

/// What a message's attachments cost beyond their reference (the message's JSON holds only
/// the blob key), in bytes at [`BYTES_PER_TOKEN`]: the provider reads the blob itself, on every
/// call that sends the message. An image: [`IMAGE_TOKENS`]. A text document
/// ([`TEXT_DOCUMENTS`](backend::documents::TEXT_DOCUMENTS)): its bytes, read as text. A PDF,
/// Word or Excel file ([`FILE_DOCUMENTS`](backend::documents::FILE_DOCUMENTS)): half its bytes
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
            Part::Document(media) if is(media, backend::documents::TEXT_DOCUMENTS) => size(media),
            Part::Document(media) if is(media, backend::documents::FILE_DOCUMENTS) => {
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

/// Output tokens `bytes` of streamed output probably cost ([`BYTES_PER_TOKEN`]).
pub fn estimate_output_tokens(bytes: usize) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend::ChatMessage;
    use transcript::{Part, Role};

    #[test]
    fn the_estimate_grows_with_the_prompt_and_history() {
        let mut request = ChatRequest {
            model: "m".into(),
            system: "x".repeat(400),
            messages: vec![],
            tools: Default::default(),
            settings: Default::default(),
        };
        assert_eq!(estimate_input_tokens(&request), 100 + 1, "400 chars + `[]`");
        request.messages.push(ChatMessage {
            role: Role::User,
            parts: vec![Part::text("y".repeat(4_000))].into(),
        });
        let with_history = estimate_input_tokens(&request);
        assert!((1_100..1_150).contains(&with_history), "{with_history}");
    }

    /// An attachment is billed by what the provider reads from the blob, not by its reference:
    /// a 700 KB CSV is about 175,000 tokens, an image up to 1,600, a PDF half its bytes up to
    /// 25,000 tokens; a voice note, sent as a line naming it, nothing.
    #[test]
    fn attachments_are_estimated_by_their_size_not_their_reference() {
        let media = |mime: &str, size_bytes| transcript::MediaRef {
            key: "media/k".into(),
            mime_type: mime.into(),
            size_bytes,
        };
        let request = |parts: Vec<Part>| ChatRequest {
            model: "m".into(),
            system: String::new(),
            messages: vec![ChatMessage {
                role: Role::User,
                parts: parts.into(),
            }],
            tools: Default::default(),
            settings: Default::default(),
        };
        let words = estimate_input_tokens(&request(vec![Part::text("see attached")]));
        let with = |part: Part| {
            estimate_input_tokens(&request(vec![Part::text("see attached"), part])) - words
        };
        let csv = with(Part::Document(media("text/csv", 700_000)));
        assert!((175_000..175_100).contains(&csv), "{csv}");
        let pdf = with(Part::Document(media("application/pdf", 100_000)));
        assert!((12_500..12_600).contains(&pdf), "{pdf}");
        let image = with(Part::Image(media("image/png", 3_000_000)));
        assert!((1_600..1_700).contains(&image), "{image}");
        let book = with(Part::Document(media("application/pdf", 4_000_000)));
        assert!((25_000..25_100).contains(&book), "{book}");
        let voice = with(Part::Document(media("audio/ogg", 1_000_000)));
        assert!(voice <= 25, "only its reference: {voice}");
    }

    #[test]
    fn text_in_other_scripts_is_estimated_by_its_bytes_not_its_characters() {
        let request = |text: &str| ChatRequest {
            model: "m".into(),
            system: String::new(),
            messages: vec![ChatMessage {
                role: Role::User,
                parts: vec![Part::text(text)].into(),
            }],
            tools: Default::default(),
            settings: Default::default(),
        };
        let framing = estimate_input_tokens(&request(""));
        // 400 characters each: English at about four a token; Chinese (three bytes each) at
        // about one, which characters / 4 would have put at 100.
        let english = estimate_input_tokens(&request(&"word ".repeat(80))) - framing;
        let chinese = estimate_input_tokens(&request(&"预算".repeat(200))) - framing;
        assert_eq!(english, 100);
        assert_eq!(chinese, 300);
        assert_eq!(estimate_output_tokens("预算".len()), 2);
    }
}
