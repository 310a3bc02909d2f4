//! A closed account is told it is closed, not paused: through the one job path (the web chat's
//! job, the guard chain's account check over the real accounts store), no model call, and the
//! sentence is what the visible transcript records; and end to end on WhatsApp through the
//! local server, as the deployment assembles it.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use bridle::channel_setup::ChannelSetup;
use budget::{PausedAccounts, StoreAccounts, lines};
use engine::{EngineOptions, TurnEnd};
use std::collections::HashMap;
use std::sync::Arc;
use store::{Account, AccountStatus, Accounts, VisibleRole};
use store_sqlite::SqliteStore;
use tests::platform_api::{PlatformApi, whatsapp_text};
use tests::server::TestServer;
use tests::{Calls, Harness, sample_tools};
use transcript::ConversationId;

/// The harness's user-1 with an account of `status`, the account guard in front of the model.
async fn user_whose_account_is(status: AccountStatus) -> Harness {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store
        .put_account(&Account {
            status,
            ..Account::new("user-1", "Ana")
        })
        .await
        .unwrap();
    let guard = Arc::new(PausedAccounts::new(Arc::new(StoreAccounts(store.clone()))));
    Harness::build_on(
        store,
        [Reply::text("never said")],
        sample_tools(Calls::default()),
        EngineOptions::default(),
        |engine| engine.with_guard(guard),
    )
    .await
}

#[tokio::test]
async fn a_closed_account_hears_that_it_is_closed() {
    let h = user_whose_account_is(AccountStatus::Closed).await;
    let t = h.turn("hello?").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied);
    assert_eq!(t.outcome.reply, lines::ACCOUNT_CLOSED);
    assert!(
        !t.outcome.reply.contains("paused"),
        "a closed account is not paused"
    );
    assert!(h.model.requests().is_empty(), "no model call");
    assert_eq!(
        h.visible().await.last().unwrap().text,
        lines::ACCOUNT_CLOSED
    );
}

#[tokio::test]
async fn a_paused_account_still_hears_that_it_is_paused() {
    let h = user_whose_account_is(AccountStatus::Paused).await;
    let t = h.turn("hello?").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied);
    assert_eq!(t.outcome.reply, lines::ACCOUNT_PAUSED);
    assert!(h.model.requests().is_empty());
}

#[tokio::test]
async fn an_active_account_is_answered() {
    let h = user_whose_account_is(AccountStatus::Active).await;
    let t = h.turn("hello?").await;
    assert_eq!(t.outcome.reply, "never said");
    assert_eq!(h.model.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_account_on_whatsapp_hears_that_it_is_closed() {
    const SECRET: &str = "wa-app-secret";
    const FROM: &str = "491701234567";
    let api = PlatformApi::start().await;
    let vars: HashMap<&str, String> = [
        ("WHATSAPP_APP_SECRET", SECRET.into()),
        ("WHATSAPP_VERIFY_TOKEN", "wa-verify".into()),
        ("WHATSAPP_ACCESS_TOKEN", "wa-access-token".into()),
        ("WHATSAPP_PHONE_NUMBER_ID", "106540352242922".into()),
        ("WHATSAPP_API_BASE", api.base.clone()),
    ]
    .into_iter()
    .collect();
    let channels = ChannelSetup::from_vars(&|k| vars.get(k).cloned(), &reqwest::Client::new())
        .expect("channels configure");
    let model = Arc::new(ScriptedModel::new([Reply::text("never said")]));
    let server = TestServer::start(
        model.clone(),
        AppOptions {
            channels,
            ..AppOptions::default()
        },
    )
    .await;
    let store = server.app.store.clone();
    store
        .put_account(&Account {
            status: AccountStatus::Closed,
            ..Account::new("kim", "Kim")
        })
        .await
        .unwrap();
    store
        .bind_identity("whatsapp", FROM, &"kim".into(), 0)
        .await
        .unwrap();

    let (sig, body) = whatsapp_text(SECRET, FROM, "wamid.closed1", "Plan my week");
    let status = server
        .client
        .post(server.url("/webhooks/whatsapp"))
        .header("x-hub-signature-256", sig)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);

    let calls = api.wait_for(1).await;
    let sent: serde_json::Value = serde_json::from_str(&calls[0].body).unwrap();
    assert_eq!(sent["text"]["body"], lines::ACCOUNT_CLOSED, "{sent}");
    assert!(model.requests().is_empty(), "no model call");
    let conv = ConversationId(format!("whatsapp:{FROM}@kim"));
    // The sentence is recorded just after the platform took it.
    let visible = tests::eventually("the sentence recorded", || async {
        let visible = store.visible(&conv).await.unwrap();
        (visible.len() >= 2).then_some(visible)
    })
    .await;
    let entries: Vec<(VisibleRole, &str)> =
        visible.iter().map(|e| (e.role, e.text.as_str())).collect();
    assert_eq!(
        entries,
        [
            (VisibleRole::User, "Plan my week"),
            (VisibleRole::Assistant, lines::ACCOUNT_CLOSED)
        ]
    );
    server.stop().await;
}
