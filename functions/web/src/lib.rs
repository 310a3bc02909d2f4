//! The web app Lambda: the router `bridle serve` runs ([`bridle::server::router`]: the web chat,
//! sign-in, link codes, the notes and planner panels, the usage meter, `/admin/budget`), behind
//! a **Lambda Function URL with `InvokeMode: RESPONSE_STREAM`**, so the web chat's tokens reach
//! the browser as server-sent events while the turn runs.
//!
//! Why a Function URL and not API Gateway: an API Gateway HTTP API buffers the whole Lambda
//! response (no streaming at all), and a REST API's streaming needs its own integration setup
//! for one route; a Function URL streams any response of the function with
//! `RESPONSE_STREAM` and adds nothing in front. `main.rs` answers through
//! `lambda_http::run_with_streaming_response`: every response, JSON or page or SSE, goes out as
//! Lambda's streamed HTTP integration response (a JSON prelude with status, headers and
//! cookies, eight NUL bytes, then the body as it is written).
//!
//! What it runs on:
//! - **DynamoDB** (`TABLE_NAME`) for everything that outlives a request: accounts, sessions and
//!   sign-ins in progress, conversations and transcripts, the job claims and the per-conversation
//!   lease that keeps a web turn and a channel turn of one conversation from interleaving.
//! - **In memory** for the job queue and the demo notes: a posted message is queued and run by
//!   the worker [`bridle::server::spawn_worker`] starts at init, *within the invocation that
//!   posted it* (the response streams until the turn's `done`). The in-memory queue only ever
//!   carries a web turn inside one invocation; nothing else reads it, and a cold start begins
//!   empty. Claims and the lease are in DynamoDB, so the job path's guarantees hold across
//!   functions.
//! - **Bedrock** (`BEDROCK_MODEL_ID`) on the shared SDK configuration, and the same assembly as
//!   the worker Lambda and `bridle serve` (DESIGN.md invariant 11).
//! - **Sign-in is required** (OpenID Connect; on AWS the Cognito user pool): there is no
//!   local-user mode here, and an init without the sign-in settings fails.
//!
//! The function sends no platform messages and holds no platform credentials; it hands out link
//! codes for the channels the webhook and worker Lambdas serve (`BRIDLE_LINKABLE_CHANNELS`).
//!
//! Settings ([`config::WebConfig`]): the environment, layered over the Secrets Manager secret
//! named by `BRIDLE_SECRETS_ARN` (read once per cold start), which holds `BRIDLE_OIDC_ISSUER`,
//! `BRIDLE_OIDC_CLIENT_ID`, `BRIDLE_OIDC_CLIENT_SECRET` and `BRIDLE_PUBLIC_URL`.

pub mod config;
