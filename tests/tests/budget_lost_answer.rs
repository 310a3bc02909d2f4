//! A budget write (and a job's claim) whose answer is lost on the way back (the write went through, the response
//! did not: a timeout, a 500) is retried by the SDK. A spend reservation applied twice would
//! charge twice, or be refused by its own first write near the cap; a give-back (`real −
//! reserved`, or a link-code try given back) applied twice would read less than was spent, and
//! let that much more through. The DynamoDB ledger writes them in transactions, whose
//! `ClientRequestToken` DynamoDB applies once (moto learns this from
//! `scripts/moto_server_serial.py`); a spend reservation spans several buckets and always was
//! one, a single-bucket give-back was a plain `UpdateItem` before. A proxy in front of moto lets
//! the write through and answers 500 instead of moto's answer.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use fake_lambda::moto_proxy::forward_to_moto;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use store::{Adjustment, BucketKey, BudgetLedger, Charge, Reserve};
use store_dynamodb::DynamoStore;
use transcript::UserId;

/// Writes seen: the operation and its `ClientRequestToken`.
type Writes = Vec<(String, Option<String>)>;

/// The proxy: whether to lose the answer of the next write, and the writes it saw.
#[derive(Clone, Default)]
struct Losing {
    lose_next_write: Arc<Mutex<bool>>,
    writes: Arc<Mutex<Writes>>,
}

#[derive(Clone)]
struct Proxy {
    losing: Losing,
    moto: String,
    http: reqwest::Client,
}

async fn forward(
    State(p): State<Proxy>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Bytes) {
    let op = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("?")
        .to_owned();
    let write = matches!(
        op.as_str(),
        "UpdateItem" | "TransactWriteItems" | "PutItem" | "DeleteItem"
    );
    if write {
        let sent: Value = serde_json::from_slice(&body).unwrap_or_default();
        let token = sent["ClientRequestToken"].as_str().map(str::to_owned);
        p.losing.writes.lock().unwrap().push((op, token));
    }
    let answer = forward_to_moto(&p.http, &p.moto, headers, body).await;
    let lose = write && std::mem::take(&mut *p.losing.lose_next_write.lock().unwrap());
    if lose && answer.0 == StatusCode::OK {
        let lost = r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"the answer was lost"}"#;
        let mut h = HeaderMap::new();
        h.insert(
            "content-type",
            "application/x-amz-json-1.0".parse().unwrap(),
        );
        return (StatusCode::INTERNAL_SERVER_ERROR, h, Bytes::from(lost));
    }
    answer
}

async fn ledger_behind_proxy() -> (DynamoStore, Losing) {
    let (_, table) = tests::moto::dynamo_table("lost-answer").await;
    let losing = Losing::default();
    let proxy = Proxy {
        losing: losing.clone(),
        moto: tests::moto::endpoint(),
        http: reqwest::Client::new(),
    };
    let client =
        tests::moto::client_through(Router::new().route("/", post(forward)).with_state(proxy))
            .await;
    (DynamoStore::new(client, table), losing)
}

fn bucket(scope: &str) -> BucketKey {
    BucketKey {
        scope: scope.into(),
        window: "day".into(),
        start_ms: 1_800_000_000_000,
    }
}

/// Reserve 1,000 under a cap of 1,500 in each of `scopes`' buckets, all or none.
async fn reserve(ledger: &DynamoStore, scopes: &[&str]) -> Reserve {
    let charges: Vec<Charge> = scopes
        .iter()
        .map(|scope| Charge {
            bucket: bucket(scope),
            amount: 1_000,
            limit: Some(1_500),
            expires_at_ms: 1_800_086_400_000,
        })
        .collect();
    ledger.reserve(&charges).await.unwrap()
}

/// The writes the proxy saw since the last take, and a check that the last two are one call
/// and its retry (one token).
fn retried(losing: &Losing) -> Writes {
    let writes = std::mem::take(&mut *losing.writes.lock().unwrap());
    assert_eq!(writes.len(), 2, "the lost answer was retried: {writes:?}");
    assert!(
        writes[0].1.is_some() && writes[0].1 == writes[1].1,
        "one token for the call and its retry: {writes:?}"
    );
    writes
}

#[tokio::test]
async fn a_spend_reservation_whose_answer_was_lost_is_applied_once() {
    let (ledger, losing) = ledger_behind_proxy().await;
    *losing.lose_next_write.lock().unwrap() = true;
    let scopes = ["user:ana", "conv:ana-1"];
    assert_eq!(
        reserve(&ledger, &scopes).await,
        Reserve::Reserved,
        "reserved, once"
    );
    let writes = retried(&losing);
    assert_eq!(
        ledger.bucket_usage(&scopes.map(bucket)).await.unwrap(),
        [1_000, 1_000],
        "{writes:?}"
    );
}

#[tokio::test]
async fn a_give_back_whose_answer_was_lost_is_applied_once() {
    let (ledger, losing) = ledger_behind_proxy().await;
    let bucket = bucket("user:ana");
    assert_eq!(reserve(&ledger, &["user:ana"]).await, Reserve::Reserved);
    losing.writes.lock().unwrap().clear();

    // The call used 400 of its 1,000: 600 go back, and the answer of that write is lost.
    *losing.lose_next_write.lock().unwrap() = true;
    ledger
        .adjust(&[Adjustment {
            bucket: bucket.clone(),
            delta: -600,
            expires_at_ms: 1_800_086_400_000,
        }])
        .await
        .expect("the SDK's retry succeeds");
    let writes = retried(&losing);
    assert_eq!(
        ledger.bucket_usage(&[bucket]).await.unwrap(),
        [400],
        "given back once: {writes:?}"
    );
}

/// A job's claim whose answer was lost: the SDK sends the claim again, which its own first
/// write refuses. That refusal is this attempt's claim, not another worker's (it read as
/// `Busy` until its own expiry: the job waited a turn's budget, and an hourly reply was taken
/// for sent); a claim by anyone else is still refused.
#[tokio::test]
async fn a_claim_whose_answer_was_lost_is_the_claimers() {
    use store::{Claim, JobClaims};
    let (store, losing) = ledger_behind_proxy().await;
    let now = 1_800_000_000_000;
    *losing.lose_next_write.lock().unwrap() = true;
    assert_eq!(
        store.claim_job("job-1", now, now + 60_000).await.unwrap(),
        Claim::Fresh
    );
    let writes = std::mem::take(&mut *losing.writes.lock().unwrap());
    assert_eq!(writes.len(), 2, "the lost answer was retried: {writes:?}");
    assert_eq!(
        store
            .claim_job("job-1", now + 1, now + 60_000)
            .await
            .unwrap(),
        Claim::Busy {
            until_ms: now + 60_000
        },
        "another worker's claim is refused"
    );
}

/// The rare single-item writes whose caller decides on the answer, their answers lost: each
/// is what happened, not the refusal the SDK's repeat met (its own first write). A Yes press's
/// record taken (it ran nothing before, and the question was gone), a sign-in's first use (it
/// read as its own replay, and the sign-in was refused), a new session (it failed as taken by
/// itself), an unlink (it said the chat was never linked).
#[tokio::test]
async fn single_writes_whose_answers_were_lost_say_what_happened() {
    use store::{Confirmations, Identities, Pending, Session, Sessions};
    let (store, losing) = ledger_behind_proxy().await;
    let now = 1_800_000_000_000;
    let lose_next = || {
        losing.writes.lock().unwrap().clear();
        *losing.lose_next_write.lock().unwrap() = true;
    };
    let conversation = transcript::ConversationId::from("web:c1@ana");
    let pending = Pending {
        conversation: conversation.clone(),
        hash: "h1".into(),
        created_on_action: "t1".into(),
        description: "Withdraw Dana Lee from Spring Open".into(),
        expires_at_ms: now + 3_600_000,
    };
    store.put_pending(&pending).await.unwrap();
    lose_next();
    let taken = store
        .take_pending(&conversation, "h1", "t2", now)
        .await
        .unwrap();
    assert_eq!(taken, Some(pending.clone()), "the press takes its record");
    retried(&losing);
    assert_eq!(
        store
            .take_pending(&conversation, "h1", "t2", now)
            .await
            .unwrap(),
        None,
        "once"
    );

    lose_next();
    assert!(
        store
            .first_use_of_login("state-1", now, now + 600_000)
            .await
            .unwrap()
    );
    retried(&losing);
    assert!(
        !store
            .first_use_of_login("state-1", now, now + 600_000)
            .await
            .unwrap(),
        "a replay is still one"
    );

    let session = Session {
        id_hash: "s".repeat(64),
        user: UserId::from("ana"),
        csrf: "c".into(),
        created_at_ms: now,
        expires_at_ms: now + 3_600_000,
    };
    lose_next();
    store
        .put_session(&session)
        .await
        .expect("the session is made");
    retried(&losing);
    assert_eq!(
        store.session(&session.id_hash, now).await.unwrap(),
        Some(session)
    );

    store
        .bind_identity("telegram", "42", &UserId::from("ana"), now)
        .await
        .unwrap();
    lose_next();
    assert!(
        store
            .unbind_identity_of("telegram", "42", &UserId::from("ana"))
            .await
            .unwrap(),
        "it was ana's, and is unlinked"
    );
    retried(&losing);
    assert_eq!(store.identity("telegram", "42").await.unwrap(), None);
}
