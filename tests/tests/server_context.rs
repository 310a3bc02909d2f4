//! The local server's context block: built from the planner and the account for every turn,
//! stored verbatim, and carrying the active record the server set after a create.

use backend::{ChatRequest, Reply, ScriptedModel};
use bridle::AppOptions;
use bridle::server::LOCAL_USER;
use serde_json::json;
use std::sync::Arc;
use store::Account;
use tests::server::TestServer;
use transcript::Role;

fn newest_user_text(request: &ChatRequest) -> String {
    let message = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .unwrap();
    message.parts.iter().filter_map(|p| p.as_text()).collect()
}

#[tokio::test]
async fn each_turn_sees_the_planner_and_account_as_they_are_now() {
    let model = Arc::new(ScriptedModel::new([
        Reply::tool_call(
            "t1",
            "create_event",
            json!({"title": "Spring Open", "starts_at": "2027-03-14T10:00", "venue": "Town Hall", "capacity": 50}),
        ),
        Reply::text("Created Spring Open."),
        Reply::text("It is still a draft."),
    ]));
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let conv = server.new_conversation().await;
    server.say(&conv, "add Spring Open on 14 March at 10").await;

    // An edit between turns, as the product UI would make it.
    server
        .app
        .store
        .put_account(&Account {
            time_zone: "Europe/Berlin".into(),
            ..Account::new(LOCAL_USER, "Dana Lee")
        })
        .await
        .unwrap();
    server.say(&conv, "what's its status?").await;

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let first = newest_user_text(&requests[0]);
    assert!(first.starts_with("<context>\nnow: "), "{first}");
    assert!(first.contains("(UTC)\nuser: You, on web\n"), "{first}");
    assert!(first.contains("Events: none"), "{first}");
    assert!(first.ends_with("<user_message>\nadd Spring Open on 14 March at 10\n</user_message>"));

    let third = newest_user_text(&requests[2]);
    assert!(
        third.contains("(Europe/Berlin)\nuser: Dana Lee, on web\n"),
        "{third}"
    );
    assert!(
        third.contains("| Spring Open | 2027-03-14 | draft"),
        "{third}"
    );
    assert!(
        third.contains("Active event:") && third.contains("Town Hall"),
        "the server made the new event active: {third}"
    );
    // The first turn's block is replayed as written, not rebuilt with today's facts.
    let replayed: String = requests[2].messages[0]
        .parts
        .iter()
        .filter_map(|p| p.as_text())
        .collect();
    assert_eq!(replayed, first);
    // The system prompt is the frozen default, the same bytes on every request.
    assert!(
        requests
            .iter()
            .all(|r| r.system == engine::DEFAULT_SYSTEM_PROMPT)
    );
    server.stop().await;
}
