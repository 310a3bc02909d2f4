//! What the model sees of a handler's return value.

use serde_json::{Value, json};

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

/// Keep a result within `cap_chars` characters of JSON. A result that fits is untouched; a
/// longer one becomes `{"truncated": true, "total_chars": N, "content": "<first chars>…"}`,
/// so the model knows it saw only part.
fn cap(value: Value, cap_chars: usize) -> Value {
    let text = value.to_string();
    let total = text.chars().count();
    if total <= cap_chars {
        return value;
    }
    let head: String = text.chars().take(cap_chars).collect();
    json!({
        "truncated": true,
        "total_chars": total,
        "shown_chars": cap_chars,
        "content": format!("{head}… [truncated: {} more characters not shown; ask for less, e.g. a narrower filter or a page]", total - cap_chars),
    })
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
        assert_eq!(s.content["truncated"], json!(true));
        assert_eq!(s.content["total_chars"], json!(61));
        let shown = s.content["content"].as_str().unwrap();
        assert!(shown.starts_with("{\"text\":\"ééé"));
        assert!(shown.contains("41 more characters not shown"));
    }

    #[test]
    fn a_result_exactly_at_the_cap_is_untouched() {
        let v = json!({"a": "xxxx"}); // {"a":"xxxx"} = 12 chars
        assert_eq!(shape_result(v.clone(), 12).content, v);
    }
}
