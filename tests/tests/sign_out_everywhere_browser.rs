//! Signing out everywhere, in two headless Chromium browsers against a real OpenID Connect
//! provider (`oidc-provider` from npm; `tests/oidc/`), whose own sessions, `auth_time` and
//! `prompt=login` are the real thing: Alice is signed in on her laptop and her phone; from the
//! laptop she signs out everywhere. The phone's session ends, and the phone's session at the
//! provider no longer signs her straight back in: the provider asks for her password again.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use fantoccini::Client;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tests::browser::{
    api_status, browser, eventually, sign_in_at_provider, sign_out_with, start_driver, text_of,
};
use tests::server::TestServer;

/// Wait until `c` shows the app signed in as Alice.
async fn signed_in_as_alice(c: &Client) {
    eventually("the signed-in name", || async {
        text_of(c, "#who-name")
            .await
            .filter(|t| t.contains("alice@example.com"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_everywhere_ends_the_phones_session_and_its_provider_sign_in() {
    let (listener, base) = TestServer::bind().await;
    let (server, provider) = TestServer::signed_in_at_real_provider(
        listener,
        &base,
        Arc::new(ScriptedModel::new([Reply::text("Hello.")])),
        AppOptions::default(),
    )
    .await;

    let driver = start_driver().await;
    let (laptop_profile, phone_profile) = (driver.temp("laptop"), driver.temp("phone"));
    let laptop = browser(&driver, &laptop_profile, (1280, 800)).await;
    let phone = browser(&driver, &phone_profile, (1280, 800)).await;
    for c in [&phone, &laptop] {
        c.goto(&format!("{base}/")).await.unwrap();
        sign_in_at_provider(c, "alice").await;
        signed_in_as_alice(c).await;
    }
    // `auth_time` is whole seconds: the phone's authentication is a second behind the sign-out.
    tokio::time::sleep(Duration::from_millis(1_100)).await;

    sign_out_with(&laptop, "#sign-out-everywhere").await;
    assert_eq!(api_status(&phone).await, json!(401));

    // Opened again, the app sends the phone to the provider, which still holds its session:
    // it is asked to authenticate Alice again, and shows its login page rather than sending
    // her straight back signed in.
    phone.goto(&format!("{base}/")).await.unwrap();
    let at = sign_in_at_provider(&phone, "alice").await;
    assert!(at.starts_with(&provider.issuer), "at the provider: {at}");
    signed_in_as_alice(&phone).await;
    assert_eq!(api_status(&phone).await, json!(200));
    // The laptop's session stays ended.
    laptop.goto(&format!("{base}/healthz")).await.unwrap();
    assert_eq!(api_status(&laptop).await, json!(401));

    laptop.close().await.unwrap();
    phone.close().await.unwrap();
    server.stop().await;
    drop(provider);
}
