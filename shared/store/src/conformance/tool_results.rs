//! Per-call tool results: written once per key, read back by the asking message's position.

use crate::{Store, StoreError};
use serde_json::json;
use transcript::{ConversationId, Part};

fn result(text: &str) -> Part {
    Part::ToolResult {
        tool_use_id: "ignored-by-the-key".into(),
        content: json!({ "result": text, "big": "x".repeat(20_000) }),
        is_error: false,
    }
}

pub async fn check_tool_results(store: &dyn Store) {
    let conv = ConversationId::from("c-tools");
    let other = ConversationId::from("c-other");
    assert!(store.tool_results(&conv, 3).await.unwrap().is_empty());
    store
        .put_tool_result(&conv, 3, "t1", &result("first"))
        .await
        .unwrap();
    store
        .put_tool_result(&conv, 3, "t2", &result("second"))
        .await
        .unwrap();
    // The same call id asked for by a later message, or in another conversation, is another key.
    store
        .put_tool_result(&conv, 7, "t1", &result("later"))
        .await
        .unwrap();
    store
        .put_tool_result(&other, 3, "t1", &result("elsewhere"))
        .await
        .unwrap();
    assert!(matches!(
        store
            .put_tool_result(&conv, 3, "t1", &result("again"))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    let got = store.tool_results(&conv, 3).await.unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(
        got["t1"],
        result("first"),
        "the first write stays, byte for byte"
    );
    assert_eq!(got["t2"], result("second"));
    assert_eq!(
        store.tool_results(&conv, 7).await.unwrap()["t1"],
        result("later")
    );
    assert_eq!(
        store.tool_results(&other, 3).await.unwrap()["t1"],
        result("elsewhere")
    );
}
