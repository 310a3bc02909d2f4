//! One EMF line: `_aws` metadata (timestamp, namespace, dimension sets, metric definitions) and
//! the dimension and metric values as top-level members, as the EMF specification requires.

use serde_json::{Map, Value, json};

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
    let mut root = Map::new();
    let mut sets = vec![Value::Array(vec![])];
    if let Some((name, value)) = dimension {
        sets.push(json!([name]));
        root.insert(name.to_owned(), Value::String(value.to_owned()));
    }
    let definitions: Vec<Value> = metrics
        .iter()
        .map(|m| json!({"Name": m.name, "Unit": m.unit.as_str()}))
        .collect();
    for m in metrics {
        root.insert(m.name.to_owned(), json!(m.value));
    }
    root.insert(
        "_aws".to_owned(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": sets,
                "Metrics": definitions,
            }],
        }),
    );
    Value::Object(root).to_string()
}
