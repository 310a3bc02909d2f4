//! The events Bridle measures, each one EMF line.

use crate::emf::{Metric, Unit, line, write_line};
use std::sync::{Arc, Mutex};

/// Where lines go: stdout (Lambda ships it to CloudWatch Logs), a buffer (tests), or nowhere.
#[derive(Debug, Clone)]
enum Sink {
    Stdout,
    Capture(Arc<Mutex<Vec<String>>>),
    Off,
}

/// The metrics emitter, cheap to clone.
#[derive(Debug, Clone)]
pub struct Metrics {
    namespace: String,
    sink: Sink,
}

impl Default for Metrics {
    /// Namespace `Bridle`, lines to stdout.
    fn default() -> Self {
        Self::stdout("Bridle")
    }
}

/// What one turn cost and did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnMetrics {
    pub channel: String,
    /// The run resumed a turn an earlier attempt started: it is not counted as a new turn.
    pub resumed: bool,
    /// Model calls made by this run.
    pub model_calls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// Tool calls that ended in an error; `None` where the caller does not know.
    pub tool_errors: Option<u32>,
    /// The turn's estimated cost in US dollars, from the price table; `None` until prices are
    /// wired in (the budget work provides them), and then the metric is not emitted at all.
    pub estimated_usd: Option<f64>,
    pub duration_ms: u64,
}

impl Metrics {
    pub fn stdout(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            sink: Sink::Stdout,
        }
    }

    /// From `BRIDLE_METRICS_NAMESPACE` (default `Bridle`), to stdout.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        Self::stdout(
            var("BRIDLE_METRICS_NAMESPACE")
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| "Bridle".to_owned()),
        )
    }

    /// Emit nothing.
    pub fn off() -> Self {
        Self {
            namespace: String::new(),
            sink: Sink::Off,
        }
    }

    /// Keep the lines in memory, for tests: the emitter and the lines it wrote.
    pub fn capture(namespace: impl Into<String>) -> (Self, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let me = Self {
            namespace: namespace.into(),
            sink: Sink::Capture(lines.clone()),
        };
        (me, lines)
    }

    /// A delivery was verified and `count` jobs were queued.
    pub fn webhook_accepted(&self, channel: &str, count: usize) {
        self.emit(
            Some(("Channel", channel)),
            &[Metric {
                name: "WebhookAccepted",
                value: count as f64,
                unit: Unit::Count,
            }],
        );
    }

    /// A delivery was refused; `reason` is a short stable name (`bad_signature`, `too_large`, …).
    pub fn webhook_rejected(&self, reason: &str) {
        self.emit(
            Some(("Reason", reason)),
            &[Metric {
                name: "WebhookRejects",
                value: 1.0,
                unit: Unit::Count,
            }],
        );
    }

    /// A job failed on its last attempt and went to the dead letters.
    pub fn job_given_up(&self, channel: &str) {
        self.emit(
            Some(("Channel", channel)),
            &[Metric {
                name: "JobsGivenUp",
                value: 1.0,
                unit: Unit::Count,
            }],
        );
    }

    /// One turn ran.
    pub fn turn(&self, t: &TurnMetrics) {
        let count = |name, value: u64| Metric {
            name,
            value: value as f64,
            unit: Unit::Count,
        };
        let mut metrics = vec![
            count("Turns", u64::from(!t.resumed)),
            count("ModelCalls", u64::from(t.model_calls)),
            count("InputTokens", t.input_tokens),
            count("OutputTokens", t.output_tokens),
            count("CacheReadTokens", t.cache_read_tokens),
            count("CacheWriteTokens", t.cache_write_tokens),
            Metric {
                name: "TurnMs",
                value: t.duration_ms as f64,
                unit: Unit::Milliseconds,
            },
        ];
        if let Some(errors) = t.tool_errors {
            metrics.push(count("ToolErrors", u64::from(errors)));
        }
        if let Some(usd) = t.estimated_usd {
            metrics.push(Metric {
                name: "EstimatedUsd",
                value: usd,
                unit: Unit::None,
            });
        }
        self.emit(Some(("Channel", &t.channel)), &metrics);
    }

    fn emit(&self, dimension: Option<(&str, &str)>, metrics: &[Metric]) {
        if matches!(self.sink, Sink::Off) {
            return;
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        match &self.sink {
            Sink::Stdout => {
                // One buffer, one locked write: the line and its newline reach the log together.
                let mut out = Vec::with_capacity(256);
                write_line(&mut out, &self.namespace, now_ms, dimension, metrics);
                out.push(b'\n');
                // A metric line that cannot be written is dropped; the request goes on.
                let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), &out);
            }
            Sink::Capture(lines) => lines.lock().unwrap_or_else(|e| e.into_inner()).push(line(
                &self.namespace,
                now_ms,
                dimension,
                metrics,
            )),
            Sink::Off => {}
        }
    }
}
