//! The reservation size of a call: its input estimated from the request, plus an output
//! allowance.

use backend::ChatRequest;
use transcript::json_bytes;

/// UTF-8 bytes per token used by the estimate. English prose runs at about four characters a
/// token, one byte each; JSON and code at fewer, which the output allowance and the settle
/// step absorb. Bytes rather than characters: scripts whose characters take two to four bytes
/// (Cyrillic, Greek, Chinese, Japanese, emoji) run at about one token per one to three
/// characters, which characters / 4 would undercount by up to four times, and their bytes / 4
/// track.
pub const BYTES_PER_TOKEN: usize = 4;

/// Input tokens a request will probably cost: the UTF-8 bytes of the system prompt, the
/// messages (as their JSON) and the tool catalogue, divided by [`BYTES_PER_TOKEN`], rounded
/// up. Cache reads are not guessed: they are counted as input, which only over-reserves.
pub fn estimate_input_tokens(request: &ChatRequest) -> u64 {
    let bytes = request.system.len() + json_bytes(&request.messages) + json_bytes(&*request.tools);
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
