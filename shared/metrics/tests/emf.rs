//! The lines are valid EMF (what CloudWatch needs to turn a log line into metrics) and carry
//! the metrics and dimensions the dashboard in infra/ reads.

use metrics::{Metrics, TurnMetrics};
use serde_json::Value;

/// Check one line against the EMF specification; return it parsed.
fn valid_emf(line: &str) -> Value {
    assert!(!line.contains('\n'), "one line per event");
    let v: Value = serde_json::from_str(line).expect("JSON");
    let aws = &v["_aws"];
    assert!(
        aws["Timestamp"].as_i64().unwrap() > 1_600_000_000_000,
        "ms timestamp"
    );
    let directives = aws["CloudWatchMetrics"].as_array().unwrap();
    assert_eq!(directives.len(), 1);
    for d in directives {
        assert!(!d["Namespace"].as_str().unwrap().is_empty());
        for set in d["Dimensions"].as_array().unwrap() {
            for key in set.as_array().unwrap() {
                let key = key.as_str().unwrap();
                assert!(
                    v[key].is_string(),
                    "dimension {key} has a value on the root"
                );
            }
        }
        let defs = d["Metrics"].as_array().unwrap();
        assert!(!defs.is_empty());
        for m in defs {
            let name = m["Name"].as_str().unwrap();
            assert!(v[name].is_number(), "metric {name} has a value on the root");
            assert!(
                ["Count", "Milliseconds", "None"].contains(&m["Unit"].as_str().unwrap()),
                "a CloudWatch unit"
            );
        }
    }
    v
}

fn names(v: &Value) -> Vec<&str> {
    v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect()
}

fn dimension_sets(v: &Value) -> Value {
    v["_aws"]["CloudWatchMetrics"][0]["Dimensions"].clone()
}

#[test]
fn a_rejected_webhook_counts_by_reason_and_in_total() {
    let (m, lines) = Metrics::capture("BridleTest");
    m.webhook_rejected("bad_signature");
    let lines = lines.lock().unwrap();
    let v = valid_emf(&lines[0]);
    assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Namespace"], "BridleTest");
    assert_eq!(names(&v), ["WebhookRejects"]);
    assert_eq!(v["WebhookRejects"], 1.0);
    assert_eq!(v["Reason"], "bad_signature");
    assert_eq!(dimension_sets(&v), serde_json::json!([[], ["Reason"]]));
}

#[test]
fn an_accepted_webhook_counts_its_jobs_by_channel() {
    let (m, lines) = Metrics::capture("Bridle");
    m.webhook_accepted("whatsapp", 2);
    let v = valid_emf(&lines.lock().unwrap()[0]);
    assert_eq!(v["WebhookAccepted"], 2.0);
    assert_eq!(v["Channel"], "whatsapp");
}

#[test]
fn a_turn_reports_model_calls_and_tokens_by_kind() {
    let (m, lines) = Metrics::capture("Bridle");
    m.turn(&TurnMetrics {
        channel: "telegram".into(),
        resumed: false,
        model_calls: 3,
        input_tokens: 1200,
        output_tokens: 340,
        cache_read_tokens: 900,
        cache_write_tokens: 50,
        tool_errors: Some(1),
        estimated_usd: Some(0.0123),
        duration_ms: 2500,
    });
    let v = valid_emf(&lines.lock().unwrap()[0]);
    assert_eq!(
        names(&v),
        [
            "Turns",
            "ModelCalls",
            "InputTokens",
            "OutputTokens",
            "CacheReadTokens",
            "CacheWriteTokens",
            "TurnMs",
            "ToolErrors",
            "EstimatedUsd"
        ]
    );
    assert_eq!(v["Turns"], 1.0);
    assert_eq!(v["ModelCalls"], 3.0);
    assert_eq!(v["InputTokens"], 1200.0);
    assert_eq!(v["OutputTokens"], 340.0);
    assert_eq!(v["CacheReadTokens"], 900.0);
    assert_eq!(v["CacheWriteTokens"], 50.0);
    assert_eq!(v["EstimatedUsd"], 0.0123);
    assert_eq!(v["Channel"], "telegram");
}

#[test]
fn unknown_cost_and_tool_errors_are_left_out_not_reported_as_zero() {
    let (m, lines) = Metrics::capture("Bridle");
    m.turn(&TurnMetrics {
        channel: "slack".into(),
        ..TurnMetrics::default()
    });
    let v = valid_emf(&lines.lock().unwrap()[0]);
    assert!(!names(&v).contains(&"EstimatedUsd"));
    assert!(!names(&v).contains(&"ToolErrors"));
    assert!(v.get("EstimatedUsd").is_none());
}

#[test]
fn the_namespace_comes_from_the_environment() {
    let m = Metrics::from_vars(|k| (k == "BRIDLE_METRICS_NAMESPACE").then(|| "Custom".into()));
    assert!(format!("{m:?}").contains("Custom"));
    let m = Metrics::from_vars(|_| Some("  ".into()));
    assert!(format!("{m:?}").contains("\"Bridle\""));
}

#[test]
fn a_resumed_turn_is_not_counted_as_a_new_turn() {
    let (m, lines) = Metrics::capture("Bridle");
    m.turn(&TurnMetrics {
        channel: "whatsapp".into(),
        resumed: true,
        model_calls: 0,
        ..TurnMetrics::default()
    });
    let v = valid_emf(&lines.lock().unwrap()[0]);
    assert_eq!(v["Turns"], 0.0);
    assert_eq!(v["ModelCalls"], 0.0);
}
