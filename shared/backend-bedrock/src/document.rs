//! `serde_json::Value` ↔ `aws_smithy_types::Document`, both ways. Pure.
//!
//! Tool schemas, tool inputs, JSON tool results and `additionalModelRequestFields` are Smithy
//! documents on the Converse wire. Numbers keep their kind: a non-negative integer is `PosInt`,
//! a negative one `NegInt`, anything else `Float`. A non-finite float (which JSON cannot hold)
//! comes back as `null`.

use aws_smithy_types::{Document, Number};
use serde_json::{Map, Value};

/// The Smithy document for a JSON value.
pub fn to_document(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => Document::Number(if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            Number::Float(n.as_f64().unwrap_or(f64::NAN))
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Array(items) => Document::Array(items.iter().map(to_document).collect()),
        Value::Object(map) => Document::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), to_document(v)))
                .collect(),
        ),
    }
}

/// The JSON value for a Smithy document.
pub fn from_document(document: &Document) -> Value {
    match document {
        Document::Null => Value::Null,
        Document::Bool(b) => Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => Value::from(*u),
        Document::Number(Number::NegInt(i)) => Value::from(*i),
        Document::Number(Number::Float(f)) => {
            serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
        }
        Document::String(s) => Value::String(s.clone()),
        Document::Array(items) => Value::Array(items.iter().map(from_document).collect()),
        Document::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), from_document(v)))
                .collect::<Map<_, _>>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: Value) {
        assert_eq!(from_document(&to_document(&value)), value, "{value}");
    }

    #[test]
    fn every_kind_of_value_survives_the_round_trip() {
        round_trip(json!(null));
        round_trip(json!(true));
        round_trip(json!("text with \"quotes\" and ünïcode ☕"));
        round_trip(json!(0));
        round_trip(json!(u64::MAX));
        round_trip(json!(-1));
        round_trip(json!(i64::MIN));
        round_trip(json!(1.5));
        round_trip(json!(-0.25));
        round_trip(json!(1.0));
        round_trip(json!(1e300));
        round_trip(json!([]));
        round_trip(json!({}));
        round_trip(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
            "nested": [[1, -2, 3.5], {"deep": {"deeper": [null, false]}}],
        }));
    }

    #[test]
    fn numbers_keep_their_kind() {
        assert_eq!(to_document(&json!(7)), Document::Number(Number::PosInt(7)));
        assert_eq!(
            to_document(&json!(-7)),
            Document::Number(Number::NegInt(-7))
        );
        assert_eq!(
            to_document(&json!(7.25)),
            Document::Number(Number::Float(7.25))
        );
        // A float that happens to be whole stays a float.
        assert_eq!(
            to_document(&json!(2.0)),
            Document::Number(Number::Float(2.0))
        );
    }

    #[test]
    fn documents_json_cannot_hold_become_null() {
        assert_eq!(
            from_document(&Document::Number(Number::Float(f64::NAN))),
            Value::Null
        );
        assert_eq!(
            from_document(&Document::Number(Number::Float(f64::INFINITY))),
            Value::Null
        );
    }

    #[test]
    fn documents_from_the_wire_convert_to_values() {
        let document = Document::Object(
            [
                ("n".to_owned(), Document::Number(Number::NegInt(-3))),
                (
                    "list".to_owned(),
                    Document::Array(vec![Document::String("a".into()), Document::Null]),
                ),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(
            from_document(&document),
            json!({"n": -3, "list": ["a", null]})
        );
    }
}
