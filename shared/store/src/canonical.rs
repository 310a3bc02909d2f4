//! Canonical JSON: object keys sorted at every level, no insignificant whitespace. Two equal
//! values give the same text whatever order their keys were built in, so the text can be
//! compared (optimistic record writes) and hashed (confirmation keys).

use serde_json::Value;

/// `value` as canonical JSON text.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_level() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"z":[{"y":2,"x":1}],"c":"é"}}"#).unwrap();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":"é","z":[{"x":1,"y":2}]},"b":1}"#
        );
        let b = json!({"a": {"z": [{"x": 1, "y": 2}], "c": "é"}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_ne!(
            canonical_json(&json!([1, 2])),
            canonical_json(&json!([2, 1]))
        );
    }
}
