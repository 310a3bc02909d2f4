//! The front door end to end in headless Chromium, against a real OpenID Connect provider
//! (`oidc-provider` from npm, the OpenID-certified one; `tests/oidc/`): a person opens the web
//! app, is sent to sign in, signs in on the provider's own login page, chats (the reply
//! streams), gets a link code, sends it from WhatsApp (a webhook signed as Meta signs it), and
//! their next WhatsApp message runs as the same account; the page lists the chat as linked and
//! unlinks it; signing out ends the session.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use bridle::channel_setup::ChannelSetup;
use fantoccini::Locator;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use store::Email;
use tests::browser::{
    api_status, browser, eventually, sign_in_at_provider, sign_out_with, start_driver, text_of,
};
use tests::platform_api::{PlatformApi, whatsapp_text};
use tests::server::TestServer;
use transcript::ConversationId;

const WA_SECRET: &str = "wa-app-secret";
const WA_FROM: &str = "491701234567";

fn whatsapp(n: u32, text: &str) -> (String, String) {
    whatsapp_text(WA_SECRET, WA_FROM, &format!("wamid.browser{n}"), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_chat_link_whatsapp_and_the_next_message_runs_as_that_user() {
    let (listener, base) = TestServer::bind().await;
    let api = PlatformApi::start().await;
    let vars: HashMap<&str, String> = [
        ("PUBLIC_BASE_URL", format!("{base}/")),
        ("WHATSAPP_APP_SECRET", WA_SECRET.into()),
        ("WHATSAPP_VERIFY_TOKEN", "wa-verify".into()),
        ("WHATSAPP_ACCESS_TOKEN", "wa-access-token".into()),
        ("WHATSAPP_PHONE_NUMBER_ID", "106540352242922".into()),
        ("WHATSAPP_DISPLAY_NUMBER", "15550783881".into()),
        ("WHATSAPP_API_BASE", api.base.clone()),
    ]
    .into_iter()
    .collect();
    let channels = ChannelSetup::from_vars(&|k| vars.get(k).cloned(), &reqwest::Client::new())
        .expect("channels configure");
    let mut slow = Reply::new();
    for word in "Hello Alice, nice to meet you here.".split_inclusive(' ') {
        slow = slow.say(word).then_wait(Duration::from_millis(80));
    }
    let model = Arc::new(ScriptedModel::new([
        slow.stop(transcript::StopReason::EndTurn),
        Reply::text("Here on WhatsApp too."),
    ]));
    let (server, provider) = TestServer::signed_in_at_real_provider(
        listener,
        &base,
        model.clone(),
        AppOptions {
            channels,
            ..AppOptions::default()
        },
    )
    .await;
    let store = server.app.store.clone();

    let driver = start_driver().await;
    let profile = driver.temp("sign-in");
    let c = browser(&driver, &profile, (1280, 800)).await;

    // Not signed in: the app sends the browser to the provider's login page.
    c.goto(&format!("{base}/")).await.unwrap();
    let at = sign_in_at_provider(&c, "alice").await;
    assert!(at.starts_with(&provider.issuer), "at the provider: {at}");

    // Back in the app, signed in as alice.
    let who = eventually("the signed-in name", || async {
        text_of(&c, "#who-name")
            .await
            .filter(|t| t.contains("alice@example.com"))
    })
    .await;
    assert_eq!(who, "alice@example.com");
    assert!(c.current_url().await.unwrap().as_str().starts_with(&base));
    let alice = store
        .account_by_email(&Email::parse("alice@example.com").unwrap())
        .await
        .unwrap()
        .expect("the first sign-in made alice's account");
    assert_eq!(alice.display_name, "Alice");

    // She chats; the reply streams (part of it shows before the whole of it).
    c.find(Locator::Css("#input"))
        .await
        .unwrap()
        .send_keys("Hi there")
        .await
        .unwrap();
    c.find(Locator::Css("#send"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let partial = eventually("a partly streamed reply", || async {
        text_of(&c, ".msg.assistant.streaming")
            .await
            .filter(|t| !t.is_empty())
    })
    .await;
    assert!(
        partial.len() < "Hello Alice, nice to meet you here.".len(),
        "{partial}"
    );
    eventually("the whole reply", || async {
        text_of(&c, ".msg.assistant:not(.streaming)")
            .await
            .filter(|t| t.contains("nice to meet you here."))
    })
    .await;

    // She gets a link code and sends it from WhatsApp.
    c.find(Locator::Css("#link-button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let code = eventually("the link code", || async {
        text_of(&c, "#link-result .link-code")
            .await
            .filter(|t| !t.is_empty())
    })
    .await;
    let post = |n: u32, text: String| {
        let client = server.client.clone();
        let url = server.url("/webhooks/whatsapp");
        async move {
            let (sig, body) = whatsapp(n, &text);
            client
                .post(url)
                .header("x-hub-signature-256", sig)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(post(1, format!("my code is {code}")).await, 200);
    let calls = api.wait_for(1).await;
    assert!(calls[0].body.contains("Linked"), "{:?}", calls[0]);
    assert_eq!(
        store.identity("whatsapp", WA_FROM).await.unwrap(),
        Some(alice.user.clone())
    );

    // Her next WhatsApp message runs as alice, in her conversation for that chat.
    assert_eq!(post(2, "What's on this week?".into()).await, 200);
    let calls = api.wait_for(2).await;
    assert!(
        calls[1].body.contains("Here on WhatsApp too."),
        "{:?}",
        calls[1]
    );
    let conv = store
        .conversation(&ConversationId(format!(
            "whatsapp:{WA_FROM}@{}",
            alice.user
        )))
        .await
        .unwrap()
        .expect("alice's WhatsApp conversation");
    assert_eq!(conv.user_id, alice.user);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let seen = serde_json::to_string(&requests[1].messages).unwrap();
    assert!(
        seen.contains("Alice") && seen.contains("What's on this week?"),
        "the turn's context names the signed-in account: {seen}"
    );

    // The page lists the chat as linked, and unlinking it there makes it a stranger again.
    c.refresh().await.unwrap();
    let linked = eventually("the linked chat", || async {
        text_of(&c, "#linked .linked-chat")
            .await
            .filter(|t| t.contains(WA_FROM))
    })
    .await;
    assert!(linked.starts_with("WhatsApp"), "{linked}");
    c.find(Locator::Css("#linked .unlink"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the chat unlinked", || async {
        (store.identity("whatsapp", WA_FROM).await.unwrap().is_none()
            && c.find(Locator::Css("#linked .linked-chat")).await.is_err())
        .then_some(())
    })
    .await;

    // Signing out ends the session: the API is closed to this browser again.
    sign_out_with(&c, "#sign-out").await;
    c.goto(&format!("{base}/healthz")).await.unwrap();
    assert_eq!(api_status(&c).await, json!(401));
    c.close().await.unwrap();
    server.stop().await;
    drop(provider);
}
