//! Deleting a note is for good, so `delete_note` needs the user's yes on a later message, as the
//! planner's risky calls do: the local server's own assembly (its notes policy before the
//! planner's), a scripted model that tries to delete without asking, and the HTTP API.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use serde_json::{Value, json};
use std::sync::Arc;
use tests::server::{TestServer, tokens};
use transcript::{Part, StopReason};

async fn notes(server: &TestServer) -> Vec<String> {
    let body: Value = server
        .client
        .get(server.url("/api/notes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["text"].as_str().unwrap().to_owned())
        .collect()
}

/// What the model read as the result of its call `id`.
fn result_of(model: &ScriptedModel, id: &str) -> String {
    model
        .requests()
        .iter()
        .flat_map(|r| r.messages.iter())
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match p {
            Part::ToolResult {
                tool_use_id,
                content,
                ..
            } if tool_use_id == id => Some(content.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the model never read a result of {id}"))
}

fn delete(id: &str) -> Reply {
    Reply::new()
        .call(id, "delete_note", json!({"id": 1}))
        .stop(StopReason::ToolUse)
}

#[tokio::test]
async fn a_note_is_deleted_only_after_the_user_says_yes_on_a_later_message() {
    // The note's text was typed by the model (add_note needs no yes): it tries to write a line
    // of the question with it.
    let text = "buy milk\n\nIf you say yes: nothing is lost";
    let model = Arc::new(ScriptedModel::new([
        Reply::new()
            .call("t1", "add_note", json!({"text": text}))
            .stop(StopReason::ToolUse),
        Reply::text("Saved."),
        // Asked to tidy up, it deletes, and tries again in the same turn when held.
        delete("t2"),
        delete("t3"),
        Reply::text("Done."),
        // The user says no: the model deletes anyway.
        delete("t4"),
        Reply::text("Deleted."),
        // The user says yes to the question asked again.
        delete("t5"),
        Reply::text("Deleted it."),
    ]));
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let id = server.new_conversation().await;
    server.say(&id, "remember to buy milk").await;
    assert_eq!(notes(&server).await, [text]);

    server.say(&id, "tidy up my notes").await;
    for call in ["t2", "t3"] {
        let held = result_of(&model, call);
        assert!(held.contains("NOT EXECUTED"), "{call}: {held}");
    }
    assert_eq!(
        notes(&server).await,
        [text],
        "nothing deleted without a yes"
    );
    let (_, question) = server.history(&id).await.pop().unwrap();
    assert!(
        question.contains(r#"Delete the note "buy milk If you say yes: nothing is lost" for good"#),
        "the question names the stored note on one line: {question}"
    );
    assert!(
        !question.contains("\nIf you say yes: nothing is lost"),
        "{question}"
    );

    server.say(&id, "no, keep it").await;
    let refused = result_of(&model, "t4");
    assert!(
        refused.contains("NOT EXECUTED"),
        "a no confirms nothing: {refused}"
    );
    assert_eq!(notes(&server).await, [text]);

    server.say(&id, "yes").await;
    let ran = result_of(&model, "t5");
    assert!(ran.contains(r#""deleted":1"#), "{ran}");
    assert!(notes(&server).await.is_empty());
}

#[tokio::test]
async fn a_note_the_user_does_not_have_is_not_asked_about_and_fails_as_not_found() {
    let model = Arc::new(ScriptedModel::new([
        delete("t1"),
        Reply::text("There was no such note."),
    ]));
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let id = server.new_conversation().await;
    let events = server.say(&id, "delete note 1").await;
    let told = result_of(&model, "t1");
    assert!(told.contains("There is no note with id 1"), "{told}");
    assert!(!told.contains("NOT EXECUTED"), "{told}");
    assert_eq!(tokens(&events), "There was no such note.");
}
