//! The reservation size of a call: its input estimated from the request, plus an output
//! allowance.

use backend::ChatRequest;
pub(crate) use backend::documents::{BYTES_PER_TOKEN, media_bytes};
use transcript::json_bytes;

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
