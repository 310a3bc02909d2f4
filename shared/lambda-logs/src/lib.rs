//! How the webhook and worker Lambdas log: to stderr (Lambda sends it to CloudWatch Logs, which
//! stamps each line, so no timestamp and no colour) at the level `RUST_LOG` names, `info` when
//! it is unset.
//!
//! A bare level (`info`, `warn`, ... as deployed) becomes a plain level filter. Anything else
//! (`worker=debug,info`) becomes an `EnvFilter`, whose directive parser compiles regexes at
//! start-up; a bare level does not need it. (Measured with `scripts/cold-start --worker`, the
//! difference is within the noise; the point is one way of logging for both Lambdas.)
//!
//! A bootstrap whose init fails reports it with [`InitError::report`]: the problems readably in
//! the log, and to Lambda on the Runtime API's `/runtime/init/error` (see [`init_error`]).
//!
//! Depends on `tracing-subscriber` and the Runtime API client the Lambda runtime uses; nothing
//! of Bridle's.

pub mod init_error;

pub use init_error::InitError;

use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::Registry;
use tracing_subscriber::util::SubscriberInitExt;

/// What `RUST_LOG` asks for.
#[derive(Debug)]
pub enum LogFilter {
    /// One level for everything.
    Level(LevelFilter),
    /// Per-target directives (boxed: an `EnvFilter` is large, and rare here).
    Directives(Box<EnvFilter>),
}

impl LogFilter {
    /// Read `spec` (the value of `RUST_LOG`): empty means `info`; directives that do not parse
    /// also mean `info`, so a typo in the function's settings never silences it.
    pub fn parse(spec: &str) -> Self {
        let spec = spec.trim();
        let spec = if spec.is_empty() { "info" } else { spec };
        match spec.parse::<LevelFilter>() {
            Ok(level) => Self::Level(level),
            Err(_) => match EnvFilter::try_new(spec) {
                Ok(filter) => Self::Directives(Box::new(filter)),
                Err(_) => Self::Level(LevelFilter::INFO),
            },
        }
    }
}

/// Install the process's log subscriber, at `RUST_LOG`. Call once, first thing in `main`.
pub fn init() {
    init_with(None);
}

/// [`init`], plus another layer next to the log lines (the trace exporter's, when traces are
/// on). The level filter applies to the log lines only.
pub fn init_with(traces: Option<Box<dyn Layer<Registry> + Send + Sync>>) {
    let spec = std::env::var("RUST_LOG").unwrap_or_default();
    let logs = log_lines(&spec, std::io::stderr);
    let layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> =
        std::iter::once(logs).chain(traces).collect();
    tracing_subscriber::registry().with(layers).init();
}

/// The log lines at `spec`, written to `writer`, never finer than [`never_secrets`] allows.
pub fn log_lines<W>(spec: &str, writer: W) -> Box<dyn Layer<Registry> + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .without_time()
        .with_writer(writer);
    match LogFilter::parse(spec) {
        LogFilter::Level(level) => logs.with_filter(level).with_filter(never_secrets()).boxed(),
        LogFilter::Directives(filter) => logs
            .with_filter(*filter)
            .with_filter(never_secrets())
            .boxed(),
    }
}

/// Whatever `RUST_LOG` asks for, the targets whose finest levels log what a request carried
/// stay above them: the Lambda runtime logs each raw event at `trace` (a Function URL's
/// `Authorization: Bearer` header and session cookie, a webhook's body), the AWS signer its
/// canonical request (the function's session token among its headers), the SDK each response
/// body (transcripts), reqwest the URLs it is redirected to (Telegram's carry the bot token).
pub fn never_secrets() -> Targets {
    Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_target("lambda_runtime", LevelFilter::DEBUG)
        .with_target("lambda_http", LevelFilter::DEBUG)
        .with_target("aws_sigv4", LevelFilter::DEBUG)
        .with_target("aws_smithy_runtime", LevelFilter::DEBUG)
        .with_target("reqwest", LevelFilter::INFO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(spec: &str) -> Option<LevelFilter> {
        match LogFilter::parse(spec) {
            LogFilter::Level(level) => Some(level),
            LogFilter::Directives(_) => None,
        }
    }

    #[test]
    fn unset_or_blank_is_info() {
        assert_eq!(level(""), Some(LevelFilter::INFO));
        assert_eq!(level("  "), Some(LevelFilter::INFO));
    }

    #[test]
    fn a_bare_level_is_a_plain_filter_in_any_case() {
        assert_eq!(level("warn"), Some(LevelFilter::WARN));
        assert_eq!(level("DEBUG"), Some(LevelFilter::DEBUG));
        assert_eq!(level(" error "), Some(LevelFilter::ERROR));
        assert_eq!(level("off"), Some(LevelFilter::OFF));
    }

    #[test]
    fn per_target_directives_keep_their_targets() {
        match LogFilter::parse("worker=debug,info") {
            LogFilter::Directives(filter) => {
                let shown = filter.to_string();
                assert!(shown.contains("worker=debug"), "{shown}");
                assert!(shown.contains("info"), "{shown}");
            }
            other => panic!("directives stay directives: {other:?}"),
        }
    }

    /// What a subscriber at `spec` writes of one event per target, each at `trace`.
    fn written_at(spec: &str) -> String {
        use std::sync::{Arc, Mutex};
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = out.clone();
        let writer = move || Kept(sink.clone());
        let subscriber = tracing_subscriber::registry().with(vec![log_lines(spec, writer)]);
        tracing::subscriber::with_default(subscriber, || {
            tracing::trace!(target: "lambda_runtime::layers::api_response", body = "Bearer brd_secret", "raw JSON event received from Lambda");
            tracing::trace!(target: "aws_sigv4::http_request::sign", canonical_request = "x-amz-security-token:IQoJ", "calculated signing parameters");
            tracing::trace!(target: "worker::job", "a trace line of our own");
            tracing::debug!(target: "lambda_runtime::runtime", "a debug line of the runtime");
        });
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    struct Kept(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Kept {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn trace_never_shows_what_a_request_carried() {
        for spec in ["trace", "lambda_runtime=trace,aws_sigv4=trace,trace"] {
            let written = written_at(spec);
            assert!(
                written.contains("a trace line of our own"),
                "{spec}: {written}"
            );
            assert!(
                written.contains("a debug line of the runtime"),
                "{spec}: {written}"
            );
            assert!(!written.contains("brd_secret"), "{spec}: {written}");
            assert!(!written.contains("IQoJ"), "{spec}: {written}");
        }
        assert_eq!(written_at("info"), "");
    }

    #[test]
    fn directives_that_do_not_parse_fall_back_to_info() {
        assert_eq!(level("worker=loud"), Some(LevelFilter::INFO));
    }
}
