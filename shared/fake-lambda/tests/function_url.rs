//! The local Function URL front: requests become Function URL events (checked against
//! `aws_lambda_events`' type, which `lambda_http` reads them as), streamed responses reach the
//! client chunk by chunk before they end, buffered responses and invocation errors are answered
//! as a Function URL answers them. The "bootstrap" here is the test itself, speaking the Runtime
//! API over HTTP as `lambda_runtime` does.

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use fake_lambda::{PostedKind, RuntimeApi};
use futures::StreamExt;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::mpsc;

const WITHIN: Duration = Duration::from_secs(10);

/// `next` as a bootstrap calls it: the request id and the event.
async fn next(http: &reqwest::Client, api: &RuntimeApi) -> (String, Value) {
    let res = tokio::time::timeout(
        WITHIN,
        http.get(format!(
            "http://{}/2018-06-01/runtime/invocation/next",
            api.address()
        ))
        .send(),
    )
    .await
    .expect("an event within the time")
    .unwrap();
    let id = res.headers()["lambda-runtime-aws-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    (id, res.json().await.unwrap())
}

fn response_url(api: &RuntimeApi, id: &str, what: &str) -> String {
    format!(
        "http://{}/2018-06-01/runtime/invocation/{id}/{what}",
        api.address()
    )
}

#[tokio::test]
async fn a_request_becomes_a_function_url_event_and_a_streamed_response_arrives_as_it_is_sent() {
    let mut api = RuntimeApi::start([]).await.unwrap();
    let url = api.function_url().await.unwrap();
    let http = reqwest::Client::new();

    let client = tokio::spawn({
        let http = http.clone();
        let url = url.clone();
        async move {
            http.post(format!("{url}/api/things/7?b=2&a=1"))
                .header("cookie", "session=s1; theme=dark")
                .header("x-csrf-token", "t")
                .header("content-type", "application/json")
                .body(r#"{"text":"hello"}"#)
                .send()
                .await
                .unwrap()
        }
    });
    let (id, event) = next(&http, &api).await;
    let parsed: ApiGatewayV2httpRequest = serde_json::from_value(event.clone()).unwrap();
    assert_eq!(parsed.raw_path.as_deref(), Some("/api/things/7"));
    assert_eq!(parsed.raw_query_string.as_deref(), Some("b=2&a=1"));
    assert_eq!(parsed.request_context.http.method, "POST");
    assert_eq!(parsed.request_context.stage.as_deref(), Some("$default"));
    assert_eq!(
        parsed.cookies,
        Some(vec!["session=s1".to_owned(), "theme=dark".to_owned()])
    );
    assert!(parsed.headers.get("cookie").is_none(), "{event}");
    assert_eq!(parsed.headers["x-csrf-token"], "t");
    assert_eq!(parsed.body.as_deref(), Some(r#"{"text":"hello"}"#));
    assert!(!parsed.is_base64_encoded);

    // The bootstrap streams: prelude, delimiter, one event; then waits until the client has
    // read that event before it sends the next one and ends.
    let (tx, rx) = mpsc::channel::<Vec<u8>>(4);
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|c| (Ok::<_, Infallible>(c), rx))
    });
    let posting = tokio::spawn(
        http.post(response_url(&api, &id, "response"))
            .header("Lambda-Runtime-Function-Response-Mode", "streaming")
            .header(
                "Content-Type",
                "application/vnd.awslambda.http-integration-response",
            )
            .body(reqwest::Body::wrap_stream(body))
            .send(),
    );
    let prelude = json!({
        "statusCode": 200,
        "headers": {"content-type": "text/event-stream"},
        "cookies": ["a=1; Path=/", "b=2; Path=/"],
    });
    let mut first = prelude.to_string().into_bytes();
    first.extend_from_slice(&[0; 8]);
    first.extend_from_slice(b"event: token\ndata: one\n\n");
    tx.send(first).await.unwrap();

    let res = tokio::time::timeout(WITHIN, client)
        .await
        .expect("the head arrives before the body ends")
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let cookies: Vec<&str> = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(cookies, ["a=1; Path=/", "b=2; Path=/"]);
    let mut body = res.bytes_stream();
    let chunk = tokio::time::timeout(WITHIN, body.next())
        .await
        .expect("the first event arrives while the response is still open")
        .unwrap()
        .unwrap();
    assert_eq!(&chunk[..], b"event: token\ndata: one\n\n");

    tx.send(b"event: done\ndata: {}\n\n".to_vec())
        .await
        .unwrap();
    drop(tx);
    let mut rest = Vec::new();
    while let Some(chunk) = body.next().await {
        rest.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(rest, b"event: done\ndata: {}\n\n");
    assert_eq!(posting.await.unwrap().unwrap().status(), 202);
    let posted = api.next_posted(WITHIN).await;
    assert_eq!(
        (posted.kind, posted.request_id.as_str()),
        (PostedKind::Response, id.as_str())
    );
    assert_eq!(posted.body["prelude"]["statusCode"], 200);
    assert!(
        posted.body["body"]
            .as_str()
            .unwrap()
            .ends_with("data: {}\n\n"),
        "{}",
        posted.body
    );
}

#[tokio::test]
async fn buffered_responses_binary_bodies_and_errors_are_answered_as_a_function_url_does() {
    let api = RuntimeApi::start([]).await.unwrap();
    let url = api.function_url().await.unwrap();
    let http = reqwest::Client::new();

    // A buffered API Gateway v2 style response, with a binary request body on the way in.
    let client = tokio::spawn(
        http.put(format!("{url}/upload"))
            .body(vec![0xff, 0x00, 0xfe])
            .send(),
    );
    let (id, event) = next(&http, &api).await;
    assert_eq!(event["isBase64Encoded"], true);
    assert_eq!(event["body"], "/wD+");
    assert_eq!(event["rawQueryString"], "");
    let answer = json!({
        "statusCode": 201,
        "headers": {"content-type": "text/plain"},
        "cookies": ["c=3"],
        "body": "aGVsbG8=",
        "isBase64Encoded": true,
    });
    http.post(response_url(&api, &id, "response"))
        .json(&answer)
        .send()
        .await
        .unwrap();
    let res = client.await.unwrap().unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(res.headers()["set-cookie"], "c=3");
    assert_eq!(res.text().await.unwrap(), "hello");

    // An invocation error is a 502.
    let client = tokio::spawn(http.get(format!("{url}/boom")).send());
    let (id, _) = next(&http, &api).await;
    http.post(response_url(&api, &id, "error"))
        .json(&json!({"errorType": "Oops", "errorMessage": "no"}))
        .send()
        .await
        .unwrap();
    assert_eq!(client.await.unwrap().unwrap().status(), 502);
}
