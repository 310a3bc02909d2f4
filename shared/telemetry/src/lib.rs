//! OpenTelemetry traces for every entrance (`bridle serve`, the worker, web and webhook
//! Lambdas): the `tracing` spans the code already makes, exported over OTLP.
//!
//! Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.
//! The exporter honours the standard `OTEL_*` variables: `OTEL_EXPORTER_OTLP_PROTOCOL`
//! (`http/protobuf`, and `grpc` in builds with the `grpc` feature), `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`.
//! Spans go through a bounded queue to an export thread of their own ([`queue`]): exporting
//! never slows or fails a turn; a full queue drops spans and counts them.
//!
//! [`context`] carries a trace across the job queue as W3C trace-context headers.
//!
//! Trace ids start with the second the trace began (X-Ray's shape: 4 bytes of Unix time, then
//! 12 random bytes). They are ordinary W3C ids to any collector, and X-Ray, which drops ids
//! without that timestamp, takes them through the ADOT collector's `awsxray` exporter.
//!
//! Depends on the OpenTelemetry crates (`opentelemetry-aws` for the id shape only) and `tracing`; nothing of Bridle's, no AWS SDK.

pub mod context;
mod entrance;
pub mod queue;
mod settings;

pub use context::{follow, inject_current};
pub use entrance::Traces;
pub use queue::ExportQueue;
pub use settings::{Protocol, Settings};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::time::Duration;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::registry::Registry;

/// A `tracing` layer that the process's subscriber adds next to its log layer.
pub type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// The process's trace export, when it is on. Keep it for the life of the process; call
/// [`Telemetry::flush`] where the process may freeze (a Lambda invocation's end) and
/// [`Telemetry::shutdown`] before exit.
#[derive(Debug, Clone)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    queue: ExportQueue,
}

/// Why traces stay off although an endpoint is set.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL asks for grpc, which this build does not include; use http/protobuf"
    )]
    GrpcNotBuilt,
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0:?} is not a protocol Bridle exports; use http/protobuf or grpc"
    )]
    UnknownProtocol(String),
    #[error("the OTLP exporter could not be set up")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
}

impl Telemetry {
    /// Set up the exporter the settings describe, and the layer that feeds it. `Ok(None)` when
    /// tracing is off (no endpoint). Must be called inside a Tokio runtime only if the gRPC
    /// exporter is used; the export itself runs on its own thread.
    pub fn start(settings: &Settings) -> Result<Option<(Telemetry, BoxedLayer)>, TelemetryError> {
        if !settings.enabled {
            return Ok(None);
        }
        let exporter = build_exporter(&settings.protocol, settings.endpoint.as_deref())?;
        let resource = resource(&settings.service_name);
        let queue = ExportQueue::start(exporter, &resource, settings.queue_capacity);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(queue.processor())
            .with_id_generator(opentelemetry_aws::trace::XrayIdGenerator::default())
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("bridle");
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(LevelFilter::INFO)
            .boxed();
        Ok(Some((Telemetry { provider, queue }, layer)))
    }

    /// Export what has ended so far, waiting at most `wait`. A collector that does not answer
    /// costs that wait once, never an error.
    pub fn flush(&self, wait: Duration) {
        self.queue.flush(wait);
    }

    /// Spans dropped because the export queue was full.
    pub fn dropped_spans(&self) -> u64 {
        self.queue.dropped()
    }

    /// Export what is left and stop the export thread.
    pub fn shutdown(&self) {
        self.flush(Duration::from_secs(5));
        let _ = self.provider.shutdown_with_timeout(Duration::from_secs(1));
        let dropped = self.dropped_spans();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "trace spans were dropped because the export queue was full"
            );
        }
    }
}

fn resource(default_name: &str) -> Resource {
    let builder = Resource::builder();
    // OTEL_SERVICE_NAME (read by the builder) wins over the entrance's own name.
    if std::env::var_os("OTEL_SERVICE_NAME").is_some() {
        builder.build()
    } else {
        builder.with_service_name(default_name.to_owned()).build()
    }
}

fn build_exporter(
    protocol: &Protocol,
    endpoint: Option<&str>,
) -> Result<opentelemetry_otlp::SpanExporter, TelemetryError> {
    use opentelemetry_otlp::{SpanExporter, WithExportConfig};
    match protocol {
        Protocol::HttpProtobuf => {
            let mut builder = SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary);
            if let Some(url) = endpoint {
                builder = builder.with_endpoint(url);
            }
            builder.build().map_err(TelemetryError::Exporter)
        }
        #[cfg(feature = "grpc")]
        Protocol::Grpc => {
            let mut builder = SpanExporter::builder().with_tonic();
            if let Some(url) = endpoint {
                builder = builder.with_endpoint(url);
            }
            builder.build().map_err(TelemetryError::Exporter)
        }
        #[cfg(not(feature = "grpc"))]
        Protocol::Grpc => Err(TelemetryError::GrpcNotBuilt),
        Protocol::Unknown(other) => Err(TelemetryError::UnknownProtocol(other.clone())),
    }
}
