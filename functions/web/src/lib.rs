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
//!   verified sign-ins, conversations and transcripts, the job claims and the per-conversation
//!   lease that keeps a web turn and a channel turn of one conversation from interleaving, and
//!   each user's reply-stream slots (one environment serves one request, so a user's open
//!   streams are counted there: [`in_one_invocation`], `bridle::server::streams`).
//! - **In memory** for the job queue and the demo notes: a posted message is queued and run by
//!   the worker [`bridle::server::spawn_worker`] starts at init, *within the invocation that
//!   posted it* (the response streams until the turn's `done`). The in-memory queue only ever
//!   carries a web turn inside one invocation; nothing else reads it, and a cold start begins
//!   empty. Claims and the lease are in DynamoDB, so the job path's guarantees hold across
//!   functions. A retry from that queue would never run once the environment is frozen, so a
//!   web turn gets one attempt, cut off within [`JOB_BUDGET`] ([`in_one_invocation`]): a
//!   failure closes its turn and tells the browser to send the message again.
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

use axum::extract::{ConnectInfo, Request};
use lambda_http::request::RequestContext;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How long a web turn's attempt may run here: under the function's `Timeout` (300 s in
/// `infra/template.yaml`, checked by a test), so a turn that runs long is cut off and closed
/// by the function itself, its unanswered tool calls marked not run and the browser told,
/// rather than killed by Lambda mid-turn.
pub const JOB_BUDGET: Duration = Duration::from_secs(269);

/// Margin the function keeps after [`JOB_BUDGET`] for closing the turn and its writes.
pub const CLOSING_MARGIN: Duration = Duration::from_secs(30);

/// `options` for running a web turn inside the invocation that posted it. The job queue is in
/// memory and the environment is frozen when the response ends, so a retry would never run:
/// a failed attempt is the last one (`max_receives` 1), which closes its turn in the transcript
/// and tells the browser in one calm sentence to send it again, and it ends within
/// [`JOB_BUDGET`].
pub fn in_one_invocation(options: bridle::AppOptions) -> bridle::AppOptions {
    bridle::AppOptions {
        job_budget: JOB_BUDGET,
        // One request per environment: a user's open streams are counted in the store.
        shared_streams: Some(JOB_BUDGET + channel_jobs::RELEASE_GRACE + CLOSING_MARGIN),
        queue: queue::QueueSettings {
            max_receives: 1,
            ..options.queue
        },
        ..options
    }
}

/// `bridle serve`'s router, each request carrying the address the Function URL saw it come from
/// (`requestContext.http.sourceIp`, set by the connection, not by any header the client writes)
/// as its [`ConnectInfo`], as the local server's requests carry their peer's: what is counted per
/// client address (`bridle::auth::from_address`) is counted the same way here.
pub fn router(app: bridle::server::App) -> axum::Router {
    bridle::server::router(app).layer(axum::middleware::map_request(with_source_ip))
}

async fn with_source_ip(mut request: Request) -> Request {
    if let Some(ip) = source_ip(request.extensions()) {
        request
            .extensions_mut()
            .insert(ConnectInfo(SocketAddr::new(ip, 0)));
    }
    request
}

/// The client's address in the Lambda event's request context, if it has one.
fn source_ip(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    match extensions.get::<RequestContext>()? {
        RequestContext::ApiGatewayV2(context) => context.http.source_ip.as_deref()?.parse().ok(),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Function URL event as Lambda delivers it, read by `lambda_http` as the bootstrap reads
    /// it: the request carries the event's `sourceIp`, which the router's requests then carry.
    #[test]
    fn the_function_urls_source_ip_is_the_requests_client_address() {
        let event = |ip: &str| {
            fake_lambda::function_url::event(
                "GET",
                &"/auth/callback?code=c&state=s".parse().unwrap(),
                &axum::http::HeaderMap::new(),
                b"",
                ip.parse().unwrap(),
                "req-1",
            )
        };
        for ip in ["203.0.113.7", "2001:db8::1"] {
            let request = lambda_http::request::from_str(&event(ip).to_string()).unwrap();
            assert_eq!(source_ip(request.extensions()), Some(ip.parse().unwrap()));
        }
        let mut without = event("203.0.113.7");
        without["requestContext"]["http"]
            .as_object_mut()
            .unwrap()
            .remove("sourceIp");
        let request = lambda_http::request::from_str(&without.to_string()).unwrap();
        assert_eq!(source_ip(request.extensions()), None);
    }

    /// The web function's `Timeout` in the template, in seconds.
    fn template_timeout() -> u64 {
        let template = include_str!("../../../infra/template.yaml");
        let web = template
            .split("\n  WebFunction:\n")
            .nth(1)
            .expect("the template has a WebFunction");
        let line = web
            .lines()
            .find(|l| l.trim_start().starts_with("Timeout:"))
            .expect("the WebFunction has a Timeout");
        line.trim_start()["Timeout:".len()..]
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn a_web_turn_ends_and_is_closed_before_lambda_stops_the_function() {
        let timeout = Duration::from_secs(template_timeout());
        // An attempt is cut at JOB_BUDGET, and from outside RELEASE_GRACE later at most.
        let grace = channel_jobs::RELEASE_GRACE;
        assert!(
            JOB_BUDGET + grace + CLOSING_MARGIN <= timeout,
            "JOB_BUDGET {JOB_BUDGET:?} + {grace:?} + {CLOSING_MARGIN:?} must fit the WebFunction's Timeout {timeout:?}"
        );
        let options = in_one_invocation(bridle::AppOptions::default());
        assert_eq!(options.job_budget, JOB_BUDGET);
        assert_eq!(
            options.queue.max_receives, 1,
            "no retry runs in a frozen environment"
        );
        assert_eq!(
            options.shared_streams,
            Some(JOB_BUDGET + grace + CLOSING_MARGIN),
            "streams counted across environments, each slot held no longer than the function runs"
        );
    }
}
