//! `bridle smoke` on the built binary: the built-in script on the scripted backend (how CI runs
//! it), a model server that cannot be reached (a harness failure: exit 1), and settings that are
//! not valid (exit 2, every problem named).

use std::process::{Command, Output};

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
    for turn in 1..=8 {
        assert!(stdout.contains(&format!("── turn {turn}/8")), "{stdout}");
    }
    // Every tool call and its result, the held change, the press, the undo.
    for shown in [
        "tool call:   add_note",
        "tool call:   create_event",
        "tool call:   publish_event {\"event_id\":\"ev-",
        "tool call:   update_event",
        "tool error: {\"error\":\"NOT EXECUTED: needs confirmation",
        "buttons:     Yes, do it | No",
        "user presses: Yes, do it",
        "tool call:   undo {}",
        "tool result: {\"result\":\"Undone",
        "assistant:   You're welcome! Enjoy the book club.",
    ] {
        assert!(stdout.contains(shown), "missing {shown:?} in:\n{stdout}");
    }
    // Tokens, cost and latency per turn, and the totals.
    assert_eq!(stdout.matches(" in / ").count(), 9, "{stdout}");
    assert_eq!(stdout.matches("[Answered · ").count(), 8, "{stdout}");
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
    assert!(stdout.contains("Smoke check FAILED (8)"), "{stdout}");
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
