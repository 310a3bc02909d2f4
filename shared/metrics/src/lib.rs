//! CloudWatch Embedded Metric Format (EMF): one JSON line per event on stdout, which Lambda sends
//! to CloudWatch Logs and CloudWatch turns into metrics (namespace `BRIDLE_METRICS_NAMESPACE`,
//! default `Bridle`) for the dashboard in `infra/`. Each metric is published with no dimension
//! (the totals the dashboard and alarms read) and by one low-cardinality dimension (`Channel` or
//! `Reason`); user ids never become dimensions.
//!
//! A tiny emitter (serde_json escapes the strings) rather than a crate: `metrique` needs a newer
//! Rust than the workspace's MSRV and brings a proc-macro stack, and `metrics_cloudwatch_embedded`
//! installs a process-global recorder wrapped around the Lambda service (pulling `lambda_http`
//! into the worker). Here a line is a plain function of its values, testable as data, written
//! to stdout as one buffer in one locked write.
//!
//! Depends on serde_json only: no AWS SDK, no Lambda runtime, no engine.

mod emf;
mod events;

pub use emf::{Metric, Unit, line, write_line};
pub use events::{Metrics, TurnMetrics};
