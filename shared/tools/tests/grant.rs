//! The runner refuses a tool that changes things when the call's grant is read-only, with the
//! sentence the model relays, and never reaches the handler; what changes nothing still runs.

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use tools::*;

fn ctx(grant: Grant) -> Ctx {
    Ctx {
        user_id: "u1".into(),
        actor: Actor::Agent,
        action_id: ActionId("act-1".into()),
        conversation_id: "c1".into(),
        call_key: None,
        grant,
    }
}

fn registry(ran: Arc<AtomicU32>) -> Registry {
    let mut r = Registry::default();
    let schema = json!({"type": "object"});
    let counted = |ran: Arc<AtomicU32>| {
        handler_fn(move |_ctx: Ctx, _args: Value| {
            let ran = ran.clone();
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"ok": true}))
            }
        })
    };
    r.register(
        ToolDef::new("save", "Save.", schema.clone()).purposes(&["p"]),
        counted(ran.clone()),
    )
    .unwrap();
    r.register(
        ToolDef::new("look", "Look.", schema)
            .purposes(&["p"])
            .read_only(),
        counted(ran),
    )
    .unwrap();
    r
}

fn call(name: &str) -> ToolCall {
    ToolCall {
        id: "t1".into(),
        name: name.into(),
        input: json!({}),
    }
}

#[tokio::test]
async fn a_change_under_a_read_grant_is_refused_readably_and_nothing_runs() {
    let ran = Arc::new(AtomicU32::new(0));
    let r = registry(ran.clone());
    let out = r.run(&ctx(Grant::Read), "p", &call("save")).await;
    assert!(out.is_error);
    let transcript::Part::ToolResult { content, .. } = &out.part else {
        panic!("not a tool result");
    };
    assert_eq!(
        content["error"],
        "Not allowed by your settings: this assistant may only read (change it in the web app). \
         Nothing was done; tell the user so in one line."
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the handler never ran");

    let out = r.run(&ctx(Grant::Read), "p", &call("look")).await;
    assert!(!out.is_error, "a read runs under a read grant");
    for grant in [Grant::Write, Grant::Risky] {
        let out = r.run(&ctx(grant), "p", &call("save")).await;
        assert!(!out.is_error, "{grant} lets a change run");
    }
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    // The catalogue is the same whatever the grant: it does not depend on it at all.
    let names: Vec<&str> = r.catalog_for("p").iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["look", "save"]);
}
