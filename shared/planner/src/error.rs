use store::StoreError;
use tools::{Grant, ToolError};

/// Why a planner operation did not happen, phrased for the caller (and the model).
#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    /// Absent, or not the caller's (the two are never told apart).
    #[error("No {kind} with id {id}.")]
    NotFound { kind: &'static str, id: String },
    /// The request breaks a rule of the domain: fix it or tell the user.
    #[error("{0}")]
    Rule(String),
    /// The account may not act (paused, closed, or unknown).
    #[error("This account cannot make changes right now ({0}).")]
    AccountInactive(String),
    /// Outside what the person lets their assistant do (the grant as stored now).
    #[error("{}", tools::not_allowed(*.0))]
    NotAllowed(Grant),
    /// Someone changed the record meanwhile: read it again and retry.
    #[error("That changed in the meantime; look again and retry.")]
    Changed,
    /// Every place for a timetable plan stayed taken ([`crate::plan_threads::PLAN_WAIT`]):
    /// nothing was done; retry shortly.
    #[error(
        "Bridle is busy planning other timetables just now, so nothing was done. Try again in a minute."
    )]
    Busy,
    /// Storage failed: retry later.
    #[error("storage failed")]
    Store(#[source] StoreError),
}

impl From<StoreError> for PlannerError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict { .. } => PlannerError::Changed,
            StoreError::TooLarge { .. } => PlannerError::Rule(
                "This message has already changed as much as one undo can take back (or this \
                 change alone is more), so this change was not made. Ask for the rest in a new \
                 message; if it is refused again, make the program smaller first."
                    .into(),
            ),
            other => PlannerError::Store(other),
        }
    }
}

impl From<PlannerError> for ToolError {
    fn from(err: PlannerError) -> Self {
        let code = match &err {
            PlannerError::NotFound { .. } => "not_found",
            PlannerError::Rule(_) => "rule",
            PlannerError::AccountInactive(_) => "account_inactive",
            PlannerError::NotAllowed(_) => "not_allowed",
            PlannerError::Changed => "changed",
            PlannerError::Busy => "busy",
            PlannerError::Store(_) => return ToolError::internal(err),
        };
        ToolError::domain(code, err.to_string())
    }
}
