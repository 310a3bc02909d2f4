//! One EMF line: `_aws` metadata (timestamp, namespace, dimension sets, metric definitions) and
//! the dimension and metric values as top-level members, as the EMF specification requires.
//!
//! The line is written straight into one buffer (strings escaped and numbers formatted by
//! serde_json), not built as a `serde_json::Value` tree first: the webhook writes one per
//! request.

/// A metric's unit, as CloudWatch names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
    /// Dollars and other plain numbers.
    None,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::None => "None",
        }
    }
}

/// One metric value.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub name: &'static str,
    pub value: f64,
    pub unit: Unit,
}

/// The EMF line for `metrics` at `timestamp_ms`, published once without dimensions and once by
/// `dimension` (name, value) when given.
pub fn line(
    namespace: &str,
    timestamp_ms: i64,
    dimension: Option<(&str, &str)>,
    metrics: &[Metric],
) -> String {
    let mut out = Vec::with_capacity(256);
    write_line(&mut out, namespace, timestamp_ms, dimension, metrics);
    String::from_utf8(out).expect("serde_json writes UTF-8 and the rest is ASCII")
}

/// [`line`] appended to `out`, without the newline.
pub fn write_line(
    out: &mut Vec<u8>,
    namespace: &str,
    timestamp_ms: i64,
    dimension: Option<(&str, &str)>,
    metrics: &[Metric],
) {
    out.extend_from_slice(br#"{"_aws":{"Timestamp":"#);
    serde_json::to_writer(&mut *out, &timestamp_ms).expect("writing to a Vec cannot fail");
    out.extend_from_slice(br#","CloudWatchMetrics":[{"Namespace":"#);
    string(out, namespace);
    out.extend_from_slice(br#","Dimensions":[[]"#);
    if let Some((name, _)) = dimension {
        out.extend_from_slice(b",[");
        string(out, name);
        out.push(b']');
    }
    out.extend_from_slice(br#"],"Metrics":["#);
    for (i, m) in metrics.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"Name":"#);
        string(out, m.name);
        out.extend_from_slice(br#","Unit":""#);
        out.extend_from_slice(m.unit.as_str().as_bytes());
        out.extend_from_slice(br#""}"#);
    }
    out.extend_from_slice(b"]}]}");
    if let Some((name, value)) = dimension {
        out.push(b',');
        string(out, name);
        out.push(b':');
        string(out, value);
    }
    for m in metrics {
        out.push(b',');
        string(out, m.name);
        out.push(b':');
        // As `serde_json::Value` writes an f64: a non-finite value is `null`.
        serde_json::to_writer(&mut *out, &m.value).expect("writing to a Vec cannot fail");
    }
    out.push(b'}');
}

/// `s` as a JSON string.
fn string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The line is exactly the JSON the EMF specification describes, escaping included.
    #[test]
    fn the_line_is_the_emf_document() {
        let metrics = [
            Metric {
                name: "WebhookAccepted",
                value: 2.0,
                unit: Unit::Count,
            },
            Metric {
                name: "TurnMs",
                value: 12.5,
                unit: Unit::Milliseconds,
            },
        ];
        let text = line(
            "Bri\"dle",
            1_800_000_000_123,
            Some(("Channel", "we\nb")),
            &metrics,
        );
        assert!(!text.contains('\n'));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({
                "_aws": {
                    "Timestamp": 1_800_000_000_123_i64,
                    "CloudWatchMetrics": [{
                        "Namespace": "Bri\"dle",
                        "Dimensions": [[], ["Channel"]],
                        "Metrics": [
                            {"Name": "WebhookAccepted", "Unit": "Count"},
                            {"Name": "TurnMs", "Unit": "Milliseconds"}
                        ],
                    }],
                },
                "Channel": "we\nb",
                "WebhookAccepted": 2.0,
                "TurnMs": 12.5,
            })
        );
        let bare: Value = serde_json::from_str(&line("B", 0, None, &metrics[..1])).unwrap();
        assert_eq!(
            bare["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([[]])
        );
        let nan = line(
            "B",
            0,
            None,
            &[Metric {
                value: f64::NAN,
                ..metrics[0].clone()
            }],
        );
        assert!(nan.ends_with(r#""WebhookAccepted":null}"#), "{nan}");
    }
}
