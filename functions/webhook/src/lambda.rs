//! The API Gateway (HTTP API, payload v2) adapter around [`Webhook::handle`].

use crate::{Incoming, Webhook};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};

/// Answer one API Gateway request. The body is taken exactly as delivered (lambda_http has
/// already undone API Gateway's base64 for binary bodies), so signatures check the raw bytes.
pub async fn handle(webhook: &Webhook, req: Request, now_ms: i64) -> Response<Body> {
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let body: &[u8] = match req.body() {
        Body::Empty => &[],
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
        _ => &[],
    };
    // The domain the request was made to, as API Gateway says (never the Host header): the
    // URL Twilio signs.
    let origin = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => context
            .domain_name
            .as_deref()
            .map(|domain| format!("https://{domain}")),
        _ => None,
    };
    let answer = webhook
        .handle(Incoming {
            method: req.method().as_str(),
            path: req.uri().path(),
            query: req.uri().query(),
            headers: &headers,
            body,
            now_ms,
            origin: origin.as_deref(),
        })
        .await;
    Response::builder()
        .status(answer.status)
        .header("content-type", answer.content_type)
        .body(Body::Text(answer.body))
        .expect("a status and one header always make a response")
}
