//! `bridle smoke` on the built binary: the built-in script on the scripted backend (how CI runs
//! it), a model server that cannot be reached (a harness failure: exit 1), and settings that are
//! not valid (exit 2, every problem named).

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `bridle smoke` with exactly these variables (nothing inherited from the machine's model
/// configuration).
fn smoke(vars: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bridle"));
    command.arg("smoke").env_clear();
    if let Ok(path) = std::env::var("PATH") {
        command.env("PATH", path);
    }
    command.envs(vars.iter().copied()).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_built_in_script_holds_the_whole_conversation_and_passes() {
    let out = smoke(&[("BRIDLE_BACKEND", "scripted")]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for turn in 1..=9 {
        assert!(stdout.contains(&format!("── turn {turn}/9")), "{stdout}");
    }
    // Every tool call and its result, the held change, the press, the undo (held too: it
    // reopens the event) and its press.
    for shown in [
        "tool call:   add_note",
        "tool call:   create_event",
        "tool call:   publish_event {\"event_id\":\"ev-",
        "tool call:   update_event",
        "tool error: {\"error\":\"NOT EXECUTED: needs confirmation",
        "buttons:     Yes, do it | No",
        "user presses: Yes, do it",
        "harness:     ran [{\"",
        "tool call:   undo {}",
        "which would reopen the cancelled event Book club evening",
        "\"tool\":\"undo\"",
        "assistant:   You're welcome! Enjoy the book club.",
    ] {
        assert!(stdout.contains(shown), "missing {shown:?} in:\n{stdout}");
    }
    // Tokens, cost and latency per turn, and the totals.
    assert_eq!(stdout.matches(" in / ").count(), 10, "{stdout}");
    assert_eq!(stdout.matches("[Answered · ").count(), 9, "{stdout}");
    assert_eq!(
        stdout.matches("user presses: Yes, do it").count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains("Smoke check passed"), "{stdout}");
    // Logs stay off stdout (no metric lines in the printout).
    assert!(!stdout.contains("\"_aws\""), "{stdout}");
}

#[test]
fn an_unreachable_model_server_fails_the_smoke_check() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let base_url = format!("http://{addr}/v1");
    let out = smoke(&[
        ("BRIDLE_BACKEND", "openai"),
        ("OPENAI_BASE_URL", &base_url),
        ("OPENAI_MODEL", "local"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("assistant:   I can't reach the model server right now."),
        "{stdout}"
    );
    assert!(stdout.contains("Smoke check FAILED (9)"), "{stdout}");
    assert!(stdout.contains("turn 1: the model call failed"), "{stdout}");
    // The operator's log says where.
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "cannot reach the model server at {base_url}/chat/completions"
        )),
        "{stderr}"
    );
}

/// An OpenAI-compatible server that ignores `stream: true`: every answer is one JSON
/// completion, a short text. Counts the requests it got.
async fn json_only_server() -> (String, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                axum::Json(serde_json::json!({
                    "id": format!("chatcmpl-{n}"), "object": "chat.completion",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": format!("Reply {n}.")}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103}
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_openai_compatible_server_that_answers_json_passes_and_is_asked_once_a_turn() {
    let (base_url, requests) = json_only_server().await;
    let out = tokio::task::spawn_blocking(move || {
        smoke(&[
            ("OPENAI_BASE_URL", &base_url),
            ("OPENAI_MODEL", "local"),
            ("BRIDLE_MAX_OUTPUT_TOKENS", "2048"),
        ])
    })
    .await
    .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("openai model \"local\""), "{stdout}");
    assert!(stdout.contains("max output 2048 tokens"), "{stdout}");
    assert!(stdout.contains("assistant:   Reply 9."), "{stdout}");
    assert!(stdout.contains("100 in / 3 out tokens"), "{stdout}");
    // No tool call came, so nothing was held: the confirmation is typed, not pressed.
    assert!(
        stdout.contains("nothing was held for confirmation"),
        "{stdout}"
    );
    assert!(stdout.contains("user says: Yes, cancel it."), "{stdout}");
    assert_eq!(
        requests.load(Ordering::SeqCst),
        9,
        "one request a turn, never again"
    );
}

#[test]
fn bad_settings_and_no_model_are_start_up_errors() {
    let out = smoke(&[
        ("BRIDLE_BACKEND", "scripted"),
        ("BRIDLE_TOOL_CHOICE", "always"),
        ("BRIDLE_MODEL_TIMEOUT_S", "0"),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("BRIDLE_TOOL_CHOICE=\"always\""), "{stderr}");
    assert!(stderr.contains("BRIDLE_MODEL_TIMEOUT_S=\"0\""), "{stderr}");
    assert!(out.stdout.is_empty());

    let out = smoke(&[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bridle smoke needs a model"), "{stderr}");
}
