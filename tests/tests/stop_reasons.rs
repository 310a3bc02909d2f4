//! Every stop reason has a defined outcome, recorded in history.

use backend::Reply;
use engine::{TurnEnd, lines};
use serde_json::json;
use tests::Harness;
use transcript::{Role, StopReason};

/// Script one reply, run one turn, and compare the end and the reply the user saw.
async fn check(reply: Reply, end: TurnEnd, expected_reply: &str) {
    let h = Harness::new([reply]).await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, end);
    assert_eq!(t.outcome.reply, expected_reply);
    // The whole reply is in the model transcript too, so the next turn is coherent.
    let said: Vec<String> = h
        .transcript()
        .await
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.text())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(said.join("\n\n"), expected_reply);
}

#[tokio::test]
async fn end_turn_and_stop_sequence_answer() {
    check(Reply::text("Hello."), TurnEnd::Answered, "Hello.").await;
    check(
        Reply::new().say("Hello.").stop(StopReason::StopSequence),
        TurnEnd::Answered,
        "Hello.",
    )
    .await;
}

#[tokio::test]
async fn max_tokens_tells_the_user_the_answer_was_cut_off() {
    check(
        Reply::new()
            .say("The first half")
            .stop(StopReason::MaxTokens),
        TurnEnd::CutOff,
        &format!("The first half\n\n{}", lines::CUT_OFF),
    )
    .await;
}

#[tokio::test]
async fn refusal_filter_and_guardrail_give_a_short_honest_reply() {
    for stop in [
        StopReason::Refusal,
        StopReason::ContentFiltered,
        StopReason::Guardrail,
    ] {
        check(Reply::new().stop(stop), TurnEnd::Declined, lines::DECLINED).await;
    }
    // Text the provider did send (e.g. a guardrail's own message) stands on its own.
    check(
        Reply::new()
            .say("I can't discuss that.")
            .stop(StopReason::Guardrail),
        TurnEnd::Declined,
        "I can't discuss that.",
    )
    .await;
}

#[tokio::test]
async fn context_window_exceeded_asks_for_a_new_conversation() {
    check(
        Reply::new().stop(StopReason::ContextWindowExceeded),
        TurnEnd::ContextTooLong,
        lines::TOO_LONG,
    )
    .await;
}

#[tokio::test]
async fn malformed_tool_use_and_tool_use_without_a_call_are_muddled() {
    check(
        Reply::new().stop(StopReason::MalformedToolUse),
        TurnEnd::Muddled,
        lines::MUDDLED,
    )
    .await;
    check(
        Reply::new().stop(StopReason::ToolUse),
        TurnEnd::Muddled,
        lines::MUDDLED,
    )
    .await;
}

#[tokio::test]
async fn an_unknown_stop_reason_is_handled_safely() {
    check(
        Reply::new()
            .say("Answer.")
            .stop(StopReason::Other("new_reason".into())),
        TurnEnd::Answered,
        "Answer.",
    )
    .await;
    check(
        Reply::new().stop(StopReason::Other("new_reason".into())),
        TurnEnd::Muddled,
        lines::MUDDLED,
    )
    .await;
}

#[tokio::test]
async fn an_empty_answer_still_gets_a_reply() {
    check(
        Reply::new().stop(StopReason::EndTurn),
        TurnEnd::Muddled,
        lines::EMPTY,
    )
    .await;
}

#[tokio::test]
async fn tool_calls_cut_off_by_max_tokens_are_not_run_but_answered() {
    let h = Harness::new([Reply::new()
        .call(
            "t1",
            "create_event",
            json!({"title": "Gala", "date": "2026-12-04"}),
        )
        .stop(StopReason::MaxTokens)])
    .await;
    let t = h.turn("create").await;
    assert_eq!(t.outcome.end, TurnEnd::CutOff);
    assert!(h.calls.list().is_empty(), "a cut-off call must not run");
    let rows = h.transcript().await;
    let tool = rows.iter().find(|m| m.role == Role::Tool).unwrap();
    assert!(
        serde_json::to_string(&tool.parts)
            .unwrap()
            .contains("NOT EXECUTED")
    );
}

#[tokio::test]
async fn reply_markers_become_buttons_and_a_silent_reply_an_acknowledgement() {
    let h = Harness::new([
        Reply::text("Cancel the Spring Open?\n\n<buttons>Yes, cancel | No, keep it</buttons>"),
        Reply::text("<silent/>"),
    ])
    .await;
    let t = h.turn("cancel it").await;
    assert_eq!(t.outcome.reply, "Cancel the Spring Open?");
    let titles: Vec<&str> = t.outcome.buttons.iter().map(|b| b.title.as_str()).collect();
    assert_eq!(titles, ["Yes, cancel", "No, keep it"]);
    let entry = h.visible().await.last().unwrap().clone();
    assert_eq!(entry.text, "Cancel the Spring Open?");
    assert_eq!(entry.buttons.len(), 2);
    // The model transcript keeps the exact words, markers included.
    let said = h.transcript().await.last().unwrap().text();
    assert!(said.contains("<buttons>"));

    let t = h.turn("thanks").await;
    assert!(t.outcome.silent);
    assert_eq!(t.outcome.reply, "");
    assert_eq!(h.visible().await.last().unwrap().text, lines::ACKNOWLEDGED);
}
