//! A bootstrap that cannot start says why, twice: readably in its log (the summary, then one
//! problem per line) and to Lambda, on the Runtime API's `/2018-06-01/runtime/init/error`
//! (`{"errorType": …, "errorMessage": …}` with the `Lambda-Runtime-Function-Error-Type` header),
//! so the failed init shows as that error rather than as an unexplained exit. Then it exits
//! non-zero.
//!
//! Problems name variables and reasons, never a secret's value: they are printed as given.

use lambda_runtime_api_client::{PooledClient, body::Body, build_request};
use std::process::ExitCode;
use std::time::Duration;

/// Where a failed init is reported.
pub const INIT_ERROR_PATH: &str = "/2018-06-01/runtime/init/error";
/// `errorType` of a configuration that cannot work (missing or bad settings).
pub const MISCONFIGURED: &str = "Bridle.Misconfigured";
/// `errorType` of any other failure before the function could take work (secrets unreadable, a
/// client that could not be built).
pub const INIT_FAILED: &str = "Bridle.InitFailed";
/// The Runtime API is on the same host; a report that takes longer is given up.
const POST_DEADLINE: Duration = Duration::from_secs(2);

/// Why a bootstrap could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitError {
    /// Lambda's `errorType`, also sent as the `Lambda-Runtime-Function-Error-Type` header.
    pub error_type: &'static str,
    /// What failed, e.g. `worker misconfigured`.
    pub summary: String,
    /// What is wrong, one sentence each.
    pub problems: Vec<String>,
}

impl InitError {
    /// `function`'s settings are wrong: every problem found, at once.
    pub fn misconfigured(function: &str, problems: Vec<String>) -> Self {
        Self {
            error_type: MISCONFIGURED,
            summary: format!("{function} misconfigured"),
            problems,
        }
    }

    /// `function` could not start for one reason other than its settings.
    pub fn failed(function: &str, problem: impl std::fmt::Display) -> Self {
        Self {
            error_type: INIT_FAILED,
            summary: format!("{function} could not start"),
            problems: vec![problem.to_string()],
        }
    }

    /// Any error that ended `function`'s init: an `InitError` as it is, anything else as one
    /// problem, with its causes.
    pub fn from_error(function: &str, error: Box<dyn std::error::Error + Send + Sync>) -> Self {
        match error.downcast::<Self>() {
            Ok(init) => *init,
            Err(other) => {
                let mut problem = other.to_string();
                let mut cause = other.source();
                while let Some(c) = cause {
                    problem.push_str(&format!(": {c}"));
                    cause = c.source();
                }
                Self::failed(function, problem)
            }
        }
    }

    /// What Lambda gets: the problems after the summary, on one line.
    pub fn error_message(&self) -> String {
        format!("{}: {}", self.summary, self.problems.join("; "))
    }

    /// The JSON body posted to `/runtime/init/error`.
    pub fn diagnostic(&self) -> serde_json::Value {
        serde_json::json!({"errorType": self.error_type, "errorMessage": self.error_message()})
    }

    /// Post this error to the Runtime API `client` talks to.
    pub async fn post(&self, client: &PooledClient) -> Result<(), String> {
        let request = build_request()
            .method("POST")
            .uri(INIT_ERROR_PATH)
            .header("Lambda-Runtime-Function-Error-Type", self.error_type)
            .header("Content-Type", "application/json")
            .body(Body::from(self.diagnostic().to_string()))
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(POST_DEADLINE, client.call(request)).await {
            Err(_) => Err(format!("no answer within {POST_DEADLINE:?}")),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(answer)) if answer.status().is_success() => Ok(()),
            Ok(Ok(answer)) => Err(format!("it answered {}", answer.status())),
        }
    }

    /// At the end of a failed init: print the problems to the log, one per line; post them to
    /// the Runtime API named by `AWS_LAMBDA_RUNTIME_API` (when there is one: outside Lambda
    /// there is nobody to tell); and return the failing exit code for `main` to return.
    pub async fn report(&self) -> ExitCode {
        eprintln!("{self}");
        if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
            let client = PooledClient::builder().build();
            if let Err(e) = self.post(&client).await {
                eprintln!("could not report the init error to the Lambda Runtime API: {e}");
            }
        }
        ExitCode::FAILURE
    }
}

/// The summary, then each problem on a line of its own.
impl std::fmt::Display for InitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:", self.summary)?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InitError {}

#[cfg(test)]
mod tests {
    use super::*;
    use fake_lambda::{PostedKind, RuntimeApi};

    fn two_problems() -> InitError {
        InitError::misconfigured(
            "worker",
            vec![
                "TABLE_NAME is not set (the DynamoDB table)".into(),
                "BEDROCK_MODEL_ID is not set".into(),
            ],
        )
    }

    #[test]
    fn the_log_gets_one_problem_per_line() {
        assert_eq!(
            two_problems().to_string(),
            "worker misconfigured:\n  - TABLE_NAME is not set (the DynamoDB table)\n  - \
             BEDROCK_MODEL_ID is not set"
        );
        assert_eq!(
            InitError::failed("webhook", "secret x is unreadable").to_string(),
            "webhook could not start:\n  - secret x is unreadable"
        );
    }

    #[test]
    fn any_other_error_becomes_one_problem_with_its_causes() {
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(two_problems());
        assert_eq!(InitError::from_error("worker", boxed), two_problems());
        #[derive(Debug)]
        struct Client(std::io::Error);
        impl std::fmt::Display for Client {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("could not build the HTTPS client")
            }
        }
        impl std::error::Error for Client {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let client = Client(std::io::Error::other("no roots"));
        let other = InitError::from_error("worker", Box::new(client));
        assert_eq!(other.error_type, INIT_FAILED);
        assert_eq!(
            other.problems,
            ["could not build the HTTPS client: no roots"]
        );
    }

    #[tokio::test]
    async fn the_runtime_api_gets_the_type_and_every_problem() {
        let mut api = RuntimeApi::start([]).await.unwrap();
        let client = PooledClient::builder()
            .with_endpoint(format!("http://{}", api.address()).parse().unwrap())
            .build();
        two_problems().post(&client).await.unwrap();
        let posted = api.next_posted(Duration::from_secs(10)).await;
        assert_eq!(posted.kind, PostedKind::InitError);
        assert_eq!(posted.error_type.as_deref(), Some(MISCONFIGURED));
        assert_eq!(
            posted.body,
            serde_json::json!({
                "errorType": "Bridle.Misconfigured",
                "errorMessage": "worker misconfigured: TABLE_NAME is not set (the DynamoDB \
                                 table); BEDROCK_MODEL_ID is not set",
            })
        );
    }

    #[tokio::test]
    async fn a_runtime_api_that_is_not_there_is_an_error_not_a_hang() {
        let client = PooledClient::builder()
            .with_endpoint("http://127.0.0.1:9".parse().unwrap())
            .build();
        assert!(two_problems().post(&client).await.is_err());
    }
}
