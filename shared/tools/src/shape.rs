//! What the model sees of a handler's return value.

use serde_json::{Value, json};
use transcript::json_chars;

pub(crate) struct Shaped {
    pub content: Value,
    pub effects: Option<Value>,
}

/// Strip `_effects`, wrap a list as `{"items": [...]}`, and cap the serialised size.
pub(crate) fn shape_result(value: Value, cap_chars: usize) -> Shaped {
    let (value, effects) = match value {
        Value::Object(mut map) => {
            let effects = map.remove("_effects");
            (Value::Object(map), effects)
        }
        Value::Array(items) => (json!({ "items": items }), None),
        other => (json!({ "result": other }), None),
    };
    Shaped {
        content: cap(value, cap_chars),
        effects,
    }
}

/// Keep a result within `cap_chars` characters of JSON. A result that fits is untouched. A longer
/// one becomes a string: its first `cap_chars` characters of JSON text followed by a visible
/// marker, so the model knows it saw only part (adapters send a string result as plain text, so
/// nothing is escaped twice).
fn cap(value: Value, cap_chars: usize) -> Value {
    if json_chars(&value) <= cap_chars {
        return value;
    }
    let text = value.to_string();
    let total = text.chars().count();
    let head: String = text.chars().take(cap_chars).collect();
    Value::String(format!(
        "{head}\n[truncated: showing {cap_chars} of {total} characters; {} more not shown. Ask for less, e.g. a narrower filter or a page.]",
        total - cap_chars
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_are_stripped_and_returned() {
        let s = shape_result(json!({"ok": true, "_effects": ["events"]}), 100);
        assert_eq!(s.content, json!({"ok": true}));
        assert_eq!(s.effects, Some(json!(["events"])));
    }

    #[test]
    fn lists_are_wrapped_and_scalars_named() {
        assert_eq!(
            shape_result(json!([1, 2]), 100).content,
            json!({"items": [1, 2]})
        );
        assert_eq!(
            shape_result(json!("done"), 100).content,
            json!({"result": "done"})
        );
    }

    #[test]
    fn long_results_are_cut_on_a_char_boundary_with_a_marker() {
        let big = json!({"text": "é".repeat(50)});
        let s = shape_result(big, 20);
        let shown = s.content.as_str().unwrap();
        assert!(
            shown.starts_with("{\"text\":\"ééééééééééé\n[truncated"),
            "{shown}"
        );
        assert!(shown.contains("showing 20 of 61 characters; 41 more not shown"));
    }

    #[test]
    fn a_result_exactly_at_the_cap_is_untouched() {
        let v = json!({"a": "xxxx"}); // {"a":"xxxx"} = 12 chars
        assert_eq!(shape_result(v.clone(), 12).content, v);
    }
}
