//! What an entrance's `main` does with traces: read the settings once, start the exporter,
//! add its layer to the log subscriber, say once whether traces are on.

use crate::{BoxedLayer, Settings, Telemetry, TelemetryError};
use std::time::Duration;

/// The traces of one process.
pub struct Traces {
    pub settings: Settings,
    pub telemetry: Option<Telemetry>,
    layer: Option<BoxedLayer>,
    problem: Option<TelemetryError>,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces")
            .field("settings", &self.settings)
            .field("telemetry", &self.telemetry)
            .field("problem", &self.problem)
            .finish_non_exhaustive()
    }
}

impl Traces {
    /// Read `OTEL_*` and `BRIDLE_TRACE_CONTENT`; start exporting when an endpoint is set.
    /// `service_name` is `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
    pub fn from_env(service_name: &str) -> Self {
        Self::start(Settings::from_env(service_name))
    }

    pub fn start(settings: Settings) -> Self {
        let (telemetry, layer, problem) = match Telemetry::start(&settings) {
            Ok(Some((t, layer))) => (Some(t), Some(layer), None),
            Ok(None) => (None, None, None),
            Err(e) => (None, None, Some(e)),
        };
        Traces {
            settings,
            telemetry,
            layer,
            problem,
        }
    }

    /// The layer for the subscriber (once).
    pub fn layer(&mut self) -> Option<BoxedLayer> {
        self.layer.take()
    }

    /// One log line: on, or why not although an endpoint is set. Call after the subscriber is
    /// installed.
    pub fn report(&self) {
        if let Some(problem) = &self.problem {
            tracing::warn!("traces are off: {problem}");
        } else if self.telemetry.is_some() {
            tracing::info!(
                protocol = ?self.settings.protocol,
                content = self.settings.trace_content,
                "traces are exported over OTLP"
            );
        }
    }

    /// Export what has ended (where a Lambda may freeze next): at most `wait`, never an error.
    pub fn flush(&self, wait: Duration) {
        if let Some(t) = &self.telemetry {
            t.flush(wait);
        }
    }

    /// Export what is left before the process exits.
    pub fn shutdown(&self) {
        if let Some(t) = &self.telemetry {
            t.shutdown();
        }
    }
}
