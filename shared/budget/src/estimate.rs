//! The reservation size of a call: its input estimated from the request, plus an output
//! allowance.

use backend::ChatRequest;
use transcript::json_chars;

/// Characters per token used by the estimate. English prose runs at about four; JSON and
/// code at fewer, which the output allowance and the settle step absorb.
pub const CHARS_PER_TOKEN: usize = 4;

/// Input tokens a request will probably cost: the characters of the system prompt, the
/// messages (as their JSON) and the tool catalogue, divided by [`CHARS_PER_TOKEN`], rounded
/// up. Cache reads are not guessed: they are counted as input, which only over-reserves.
pub fn estimate_input_tokens(request: &ChatRequest) -> u64 {
    let chars = request.system.chars().count()
        + json_chars(&request.messages)
        + json_chars(&*request.tools);
    chars.div_ceil(CHARS_PER_TOKEN) as u64
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
}
