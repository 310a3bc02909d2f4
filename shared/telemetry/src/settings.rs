//! The trace settings, read once at start-up from the standard `OTEL_*` variables and
//! `BRIDLE_TRACE_CONTENT`.

use std::collections::HashMap;

/// How spans travel to the collector (`OTEL_EXPORTER_OTLP_PROTOCOL`, or its traces variant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protocol {
    HttpProtobuf,
    Grpc,
    Unknown(String),
}

/// What [`crate::Telemetry::start`] needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// An OTLP endpoint is set.
    pub enabled: bool,
    /// The full traces URL (`…/v1/traces` for http/protobuf), when not the exporter's own
    /// reading of `OTEL_EXPORTER_OTLP_ENDPOINT` (a test's receiver).
    pub endpoint: Option<String>,
    pub protocol: Protocol,
    /// `service.name` when `OTEL_SERVICE_NAME` is unset: the entrance's own name.
    pub service_name: String,
    /// `BRIDLE_TRACE_CONTENT=1`: tool arguments and results go into spans as text, not only as
    /// sizes.
    pub trace_content: bool,
    /// Spans held for export at most (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048 when unset).
    pub queue_capacity: usize,
}

impl Settings {
    /// Read the process's environment.
    pub fn from_env(service_name: &str) -> Self {
        Self::from_vars(service_name, &std::env::vars().collect())
    }

    /// Read the given variables (the environment, in tests a map).
    pub fn from_vars(service_name: &str, vars: &HashMap<String, String>) -> Self {
        let get = |k: &str| vars.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let enabled = get("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
        let protocol = match get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL"))
        {
            None | Some("http/protobuf") => Protocol::HttpProtobuf,
            Some("grpc") => Protocol::Grpc,
            Some(other) => Protocol::Unknown(other.to_owned()),
        };
        let trace_content = matches!(get("BRIDLE_TRACE_CONTENT"), Some("1" | "true"));
        let queue_capacity = get("OTEL_BSP_MAX_QUEUE_SIZE")
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(2048);
        Settings {
            enabled,
            endpoint: None,
            protocol,
            service_name: service_name.to_owned(),
            trace_content,
            queue_capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Settings {
        let vars = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_vars("bridle", &vars)
    }

    #[test]
    fn off_without_an_endpoint() {
        let s = read(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("BRIDLE_TRACE_CONTENT", "1"),
        ]);
        assert!(!s.enabled);
        assert!(!read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]).enabled);
    }

    #[test]
    fn the_standard_variables_choose_the_protocol() {
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")];
        assert_eq!(read(&on).protocol, Protocol::HttpProtobuf);
        let grpc = read(&[on[0], ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(grpc.protocol, Protocol::Grpc);
        let traces_wins = read(&[
            on[0],
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ]);
        assert_eq!(traces_wins.protocol, Protocol::HttpProtobuf);
        let json = read(&[on[0], ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]);
        assert_eq!(json.protocol, Protocol::Unknown("http/json".into()));
    }

    #[test]
    fn content_only_when_asked() {
        assert!(!read(&[]).trace_content);
        assert!(!read(&[("BRIDLE_TRACE_CONTENT", "0")]).trace_content);
        assert!(read(&[("BRIDLE_TRACE_CONTENT", "1")]).trace_content);
    }
}
