/// Why the budget configuration cannot be used. Fix the named setting and start again.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// A variable holds something that is not a number of the right kind.
    #[error("{var}={value:?} is not valid: {expected}")]
    BadValue {
        var: String,
        value: String,
        expected: &'static str,
    },
    /// The operator's price file cannot be read.
    #[error("cannot read the price file {path}")]
    ReadPrices {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A price file is not the expected JSON shape.
    #[error("the price file {path} is not usable: {problem}")]
    BadPrices { path: String, problem: String },
    /// Several problems at once (all settings are checked before any is reported).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<BudgetError>),
}
