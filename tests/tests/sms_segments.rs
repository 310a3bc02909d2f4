//! What a text-message reply costs counts in the dollar caps: each SMS segment a carrier bills,
//! at `BRIDLE_SMS_USD_PER_SEGMENT`, goes into the user's, the conversation's and everyone's
//! 30-day dollars as the reply goes out. A linked sender who asks for long answers by text
//! (in characters outside GSM-7, which bill 67 to a segment) is stopped by their cap, though
//! the model calls themselves cost nothing. Through the local server, a signed Twilio webhook,
//! and a local HTTP server standing in for Twilio's Messages API.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use bridle::channel_setup::ChannelSetup;
use budget::config::Cap;
use budget::{Bucket, BudgetConfig, PriceTable, Source, lines};
use std::collections::HashMap;
use std::sync::Arc;
use tests::platform_api::PlatformApi;
use tests::server::TestServer;
use tests::twilio;

const PUBLIC_BASE_URL: &str = "https://bridle.example";
const TOKEN: &str = "twilio-auth-token";
const FROM: &str = "+15558675310";

fn cap(limit: Option<u64>) -> Cap {
    Cap {
        limit,
        source: Source::Default,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The local server with Twilio's channel on `api`, free model calls, SMS segments at $0.10,
/// the caps `caps` sets (every other the default), and `replies` for its model.
async fn start(
    api: &PlatformApi,
    caps: impl FnOnce(&mut BudgetConfig),
    replies: Vec<Reply>,
) -> (TestServer, Arc<ScriptedModel>) {
    let vars: HashMap<&str, String> = [
        ("PUBLIC_BASE_URL", PUBLIC_BASE_URL.to_owned()),
        ("TWILIO_AUTH_TOKEN", TOKEN.into()),
        ("TWILIO_ACCOUNT_SID", twilio::ACCOUNT_SID.into()),
        ("TWILIO_API_BASE", api.base.clone()),
    ]
    .into_iter()
    .collect();
    let channels = ChannelSetup::from_vars(&|k| vars.get(k).cloned(), &reqwest::Client::new())
        .expect("channels configure");
    // Model calls cost nothing here: only the text messages count.
    let free = r#"{"default": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}}"#;
    let mut budget = BudgetConfig {
        prices: PriceTable::with_file("free.json", free).unwrap(),
        sms_segment_usd: 100_000,
        ..BudgetConfig::default()
    };
    caps(&mut budget);
    let mut options = AppOptions {
        channels,
        ..AppOptions::default()
    };
    options.guards.budget = Arc::new(budget);
    let model = Arc::new(ScriptedModel::new(replies));
    (TestServer::start(model.clone(), options).await, model)
}

/// Text message `n` from `from`, posted to the server's Twilio webhook.
async fn say(server: &TestServer, from: &str, n: u64, text: &str) -> u16 {
    let url = format!("{PUBLIC_BASE_URL}/webhooks/twilio");
    let (signature, body) = twilio::signed_message(TOKEN, &url, from, n, text);
    server
        .client
        .post(server.url("/webhooks/twilio"))
        .header("x-twilio-signature", signature)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_asking_for_long_text_messages_is_stopped_by_their_dollar_cap() {
    let api = PlatformApi::start().await;
    // 600 characters outside GSM-7: 9 segments of 67; then 134: 2 more.
    let replies = vec![
        Reply::text(&"ç".repeat(600)),
        Reply::text(&"ç".repeat(134)),
        Reply::text("never sent"),
    ];
    let (server, model) = start(&api, |c| c.user_usd_30d = cap(Some(1_000_000)), replies).await;
    let store = server.app.store.clone();
    store
        .bind_identity("twilio", FROM, &"local".into(), now_ms())
        .await
        .unwrap();
    let dollars = || async {
        let start = Bucket::UserUsd30d.start(now_ms());
        let buckets = store.buckets_of_window("usd_30d", start).await.unwrap();
        let mut by_scope: Vec<(String, u64)> = buckets
            .into_iter()
            .map(|b| (b.bucket.scope, b.used))
            .collect();
        by_scope.sort();
        by_scope
    };

    assert_eq!(say(&server, FROM, 1, "tell me everything").await, 200);
    let calls = api.wait_for(1).await;
    assert_eq!(twilio::body_of(&calls[0].body).chars().count(), 600);
    // Charged just after the platform took it.
    let charged = |expected: u64| {
        let dollars = &dollars;
        async move {
            tests::eventually("the segments charged", || async {
                let buckets = dollars().await;
                buckets
                    .iter()
                    .all(|(_, used)| *used == expected)
                    .then_some(buckets)
                    .filter(|b| b.len() == 3)
            })
            .await
        }
    };
    let after_first = charged(900_000).await;
    let scopes: Vec<&str> = after_first.iter().map(|(s, _)| s.as_str()).collect();
    assert!(
        scopes[0].starts_with("conv:twilio:") && scopes[1..] == ["global", "user:local"],
        "9 segments at $0.10 for the conversation, everyone and the user: {scopes:?}"
    );

    assert_eq!(say(&server, FROM, 2, "and more").await, 200);
    api.wait_for(2).await;
    charged(1_100_000).await;

    // Over the user's $1: the next message is refused before any model call.
    assert_eq!(say(&server, FROM, 3, "and more again").await, 200);
    let calls = api.wait_for(3).await;
    assert_eq!(twilio::body_of(&calls[2].body), lines::USER_USD_30D);
    assert_eq!(model.requests().len(), 2, "no model call past the cap");
    server.stop().await;
}

/// Unknown numbers get one onboarding reply an hour each, which costs: a crowd of numbers (SMS
/// pumping) is answered only until the strangers' dollars are spent, and then not at all —
/// while a linked user, whose dollars are their own and everyone's, is answered as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_of_unknown_numbers_is_answered_only_while_the_strangers_dollars_last() {
    let api = PlatformApi::start().await;
    // Room for the first reply only.
    let replies = vec![Reply::text("Hello, linked one.")];
    let (server, model) = start(&api, |c| c.unlinked_usd_30d = cap(Some(1)), replies).await;
    assert_eq!(say(&server, "+15550000001", 1, "hi").await, 200);
    let calls = api.wait_for(1).await;
    assert!(twilio::body_of(&calls[0].body).contains("bridle.example"));
    let strangers = || async {
        let key = Bucket::UnlinkedUsd30d.key(&"".into(), &"".into(), now_ms());
        server.app.store.bucket_usage(&[key]).await.unwrap()[0]
    };
    let spent = tests::eventually("the onboarding reply charged", || async {
        Some(strangers().await).filter(|used| *used > 0)
    })
    .await;
    assert_eq!(spent % 100_000, 0, "whole segments: {spent}");

    for (n, from) in ["+15550000002", "+15550000003"].into_iter().enumerate() {
        assert_eq!(say(&server, from, 2 + n as u64, "hi").await, 200);
    }
    for n in [2, 3] {
        done(&server, n).await;
    }
    assert_eq!(api.calls().len(), 1, "no reply past the strangers' cap");
    assert_eq!(strangers().await, spent, "nothing more spent");
    assert!(model.requests().is_empty());

    // A number that links with a live code is told so (the reply counts in its user's
    // dollars, which have room, not the strangers'), and then answered.
    issue_code(&server, "K7PQ2345").await;
    assert_eq!(say(&server, FROM, 4, "K7PQ-2345").await, 200);
    let calls = api.wait_for(2).await;
    let code = texted_code(&twilio::body_of(&calls[1].body));
    assert_eq!(say(&server, FROM, 5, &format!("LINK {code}")).await, 200);
    let calls = api.wait_for(3).await;
    assert!(
        twilio::body_of(&calls[2].body).contains("Linked"),
        "{calls:?}"
    );
    assert_eq!(say(&server, FROM, 6, "hello").await, 200);
    let calls = api.wait_for(4).await;
    assert_eq!(twilio::body_of(&calls[3].body), "Hello, linked one.");
    server.stop().await;
}

/// A live link code for the local account, as the web app issues it.
async fn issue_code(server: &TestServer, code: &str) {
    let now = now_ms();
    let expires = now + 30 * 60 * 1000;
    server
        .app
        .store
        .create_link_code(code, &"local".into(), now, expires)
        .await
        .unwrap();
}

/// Whether job `n` (text message `n` from the test's numbers) has run and is done (a claim
/// that lapses at once, taken while it has not run, leaves it to the worker).
async fn done(server: &TestServer, n: u64) {
    let key = format!("twilio#SM{n:032}");
    tests::eventually("the job done", || async {
        let now = now_ms();
        let claim = server
            .app
            .store
            .claim_job(&key, now, now + 1)
            .await
            .unwrap();
        (claim == store::Claim::Done).then_some(())
    })
    .await;
}

/// An account that links and unlinks a number over and over (a new link code is a web request
/// away, and each link and unlink is a reply) is held to its own dollars, and the strangers':
/// the code texted to a number to link it counts in the account whose code asked for it, and
/// once its dollars are spent, a link is made all the same and goes unsaid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linking_over_and_over_is_held_to_the_accounts_dollars() {
    let api = PlatformApi::start().await;
    let (server, _) = start(&api, |c| c.user_usd_30d = cap(Some(1)), vec![]).await;
    issue_code(&server, "K7PQ2345").await;
    assert_eq!(say(&server, FROM, 1, "K7PQ-2345").await, 200);
    let calls = api.wait_for(1).await;
    let code = texted_code(&twilio::body_of(&calls[0].body));
    let account = || async {
        let key = Bucket::UserUsd30d.key(&"local".into(), &"".into(), now_ms());
        server.app.store.bucket_usage(&[key]).await.unwrap()[0]
    };
    tests::eventually("the texted code charged to the account", || async {
        Some(account().await).filter(|used| *used > 0)
    })
    .await;

    // The account's dollars went on the texted code.
    assert_eq!(say(&server, FROM, 2, &format!("LINK {code}")).await, 200);
    done(&server, 2).await;
    assert_eq!(
        server.app.store.identity("twilio", FROM).await.unwrap(),
        Some("local".into()),
        "linked all the same"
    );
    assert_eq!(api.calls().len(), 1, "and not told");
    server.stop().await;
}

/// The code a "to link this number" text gives (after `LINK `).
fn texted_code(text: &str) -> String {
    let (_, after) = text
        .split_once("LINK ")
        .unwrap_or_else(|| panic!("no code texted: {text}"));
    after.split_whitespace().next().unwrap().to_owned()
}
