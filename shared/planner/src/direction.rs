//! Direction marks (the Unicode controls that reorder what follows them: U+202E "right-to-left
//! override" and its kin) make a stored title or name read one way where it is shown and another
//! in the question that asked for a yes, which shows them in the order typed. No value a tool
//! writes may carry one: the call is refused, with a sentence, before it is judged or run.

use serde_json::Value;
use tools::ToolError;

/// A control that changes the order text is shown in.
fn is_direction_mark(c: char) -> bool {
    matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether `text` holds a direction mark.
pub(crate) fn is_marked(text: &str) -> bool {
    text.chars().any(is_direction_mark)
}

/// The top-level argument of `args` whose text (or text within) holds a direction mark, if any.
pub(crate) fn marked_argument(args: &Value) -> Option<&str> {
    fn holds(value: &Value) -> bool {
        match value {
            Value::String(s) => is_marked(s),
            Value::Array(items) => items.iter().any(holds),
            Value::Object(fields) => fields.iter().any(|(k, v)| is_marked(k) || holds(v)),
            _ => false,
        }
    }
    args.as_object()?
        .iter()
        .find(|(_, v)| holds(v))
        .map(|(k, _)| k.as_str())
}

/// The refusal of a call whose arguments hold a direction mark.
pub(crate) fn refused(args: &Value) -> Result<(), ToolError> {
    match marked_argument(args) {
        None => Ok(()),
        Some(field) => Err(ToolError::domain(
            "direction_mark",
            format!(
                "The {field} holds an invisible direction mark (like U+202E), which makes text read \
                 differently where it is shown; write it without one."
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_direction_mark_anywhere_in_a_value_is_refused_and_named() {
        let renamed = json!({"event_id": "e1", "title": "Spring Open\u{202e}!emoc ton od"});
        assert_eq!(marked_argument(&renamed), Some("title"));
        assert!(refused(&renamed).unwrap_err().to_string().contains("title"));
        let speakers = json!({"speakers": ["Ada", "\u{2067}Bob"]});
        assert_eq!(marked_argument(&speakers), Some("speakers"));
        // Emoji sequences (zero-width joiners) and plain right-to-left script are fine.
        let plain =
            json!({"title": "Family day \u{1F468}\u{200D}\u{1F469}", "venue": "\u{5d0}\u{5d1}"});
        assert!(refused(&plain).is_ok());
    }
}
