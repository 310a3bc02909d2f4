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
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
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
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .without_time();
    let logs = match LogFilter::parse(&spec) {
        LogFilter::Level(level) => logs.with_filter(level).boxed(),
        LogFilter::Directives(filter) => logs.with_filter(*filter).boxed(),
    };
    let layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> =
        std::iter::once(logs).chain(traces).collect();
    tracing_subscriber::registry().with(layers).init();
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

    #[test]
    fn directives_that_do_not_parse_fall_back_to_info() {
        assert_eq!(level("worker=loud"), Some(LevelFilter::INFO));
    }
}
