//! Two DynamoDB transactions that write the same item at the same moment: DynamoDB cancels one
//! with the reason `TransactionConflict`, and it wrote nothing. Every budget write touches the
//! deployment's one `global` item, so under load this is an ordinary day; the SDK does not retry
//! a cancelled transaction. The store sends it again (`store-dynamodb/src/transact.rs`), so a
//! reservation is not refused while the budget has room and a give-back is not lost. A proxy in
//! front of moto (which applies writes one at a time, so never conflicts) answers the first
//! transactions with DynamoDB's cancellation, as DynamoDB words it, without passing them on.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use fake_lambda::moto_proxy::forward_to_moto;
use std::sync::{Arc, Mutex};
use store::{Adjustment, BucketKey, BudgetLedger, Charge, Reserve, StoreError};
use store_dynamodb::DynamoStore;

/// The proxy: how many of the next transactions to cancel for a conflict, and how many
/// transactions it saw.
#[derive(Clone, Default)]
struct Conflicting {
    cancel_next: Arc<Mutex<usize>>,
    transactions: Arc<Mutex<usize>>,
    /// The `ClientRequestToken` of each transaction seen.
    tokens: Arc<Mutex<Vec<Option<String>>>>,
}

impl Conflicting {
    fn cancel(&self, n: usize) {
        *self.cancel_next.lock().unwrap() = n;
        *self.transactions.lock().unwrap() = 0;
        self.tokens.lock().unwrap().clear();
    }

    /// Each transaction seen since the last `cancel` carried a token of its own: a re-send is
    /// a new request, never a replay of the cancelled one's token with its payload.
    fn assert_tokens_differ(&self) {
        let tokens = self.tokens.lock().unwrap().clone();
        let mut distinct = tokens.clone();
        distinct.sort();
        distinct.dedup();
        assert!(
            tokens.iter().all(Option::is_some) && distinct.len() == tokens.len(),
            "{tokens:?}"
        );
    }

    fn seen(&self) -> usize {
        *self.transactions.lock().unwrap()
    }
}

#[derive(Clone)]
struct Proxy {
    conflicting: Conflicting,
    moto: String,
    http: reqwest::Client,
}

/// DynamoDB's answer to a transaction of two items cancelled by a conflict on the second.
const CANCELLED: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]","CancellationReasons":[{"Code":"None"},{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"}]}"#;

async fn forward(
    State(p): State<Proxy>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Bytes) {
    let transaction = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.ends_with(".TransactWriteItems"));
    if transaction {
        *p.conflicting.transactions.lock().unwrap() += 1;
        let sent: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let token = sent["ClientRequestToken"].as_str().map(str::to_owned);
        p.conflicting.tokens.lock().unwrap().push(token);
        let cancel = {
            let mut left = p.conflicting.cancel_next.lock().unwrap();
            let cancel = *left > 0;
            *left = left.saturating_sub(1);
            cancel
        };
        if cancel {
            let mut h = HeaderMap::new();
            h.insert(
                "content-type",
                "application/x-amz-json-1.0".parse().unwrap(),
            );
            return (StatusCode::BAD_REQUEST, h, Bytes::from(CANCELLED));
        }
    }
    forward_to_moto(&p.http, &p.moto, headers, body).await
}

async fn ledger_behind_proxy() -> (DynamoStore, Conflicting) {
    let (_, table) = tests::moto::dynamo_table("conflict").await;
    let conflicting = Conflicting::default();
    let proxy = Proxy {
        conflicting: conflicting.clone(),
        moto: tests::moto::endpoint(),
        http: reqwest::Client::new(),
    };
    let client =
        tests::moto::client_through(Router::new().route("/", post(forward)).with_state(proxy))
            .await;
    (DynamoStore::new(client, table), conflicting)
}

fn bucket(scope: &str) -> BucketKey {
    BucketKey {
        scope: scope.into(),
        window: "day".into(),
        start_ms: 1_800_000_000_000,
    }
}

/// Reserve 1,000 under a cap of 1,500 in each of `scopes`' buckets, all or none.
async fn reserve(ledger: &DynamoStore, scopes: &[&str]) -> Result<Reserve, StoreError> {
    let charges: Vec<Charge> = scopes
        .iter()
        .map(|scope| Charge {
            bucket: bucket(scope),
            amount: 1_000,
            limit: Some(1_500),
            expires_at_ms: 1_800_086_400_000,
        })
        .collect();
    ledger.reserve(&charges).await
}

const SCOPES: [&str; 2] = ["user:ana", "global"];

#[tokio::test]
async fn a_reservation_that_met_another_is_sent_again_and_applied_once() {
    let (ledger, conflicting) = ledger_behind_proxy().await;
    conflicting.cancel(2);
    assert_eq!(reserve(&ledger, &SCOPES).await.unwrap(), Reserve::Reserved);
    assert_eq!(conflicting.seen(), 3, "two cancelled, the third applied");
    conflicting.assert_tokens_differ();
    assert_eq!(
        ledger.bucket_usage(&SCOPES.map(bucket)).await.unwrap(),
        [1_000, 1_000]
    );

    // The call used 400: 600 go back, though the first give-back met another transaction.
    conflicting.cancel(1);
    let back: Vec<Adjustment> = SCOPES
        .iter()
        .map(|scope| Adjustment {
            bucket: bucket(scope),
            delta: -600,
            expires_at_ms: 1_800_086_400_000,
        })
        .collect();
    ledger.adjust(&back).await.unwrap();
    assert_eq!(conflicting.seen(), 2);
    assert_eq!(
        ledger.bucket_usage(&SCOPES.map(bucket)).await.unwrap(),
        [400, 400]
    );
}

#[tokio::test]
async fn conflicts_that_go_on_are_an_error_and_write_nothing() {
    let (ledger, conflicting) = ledger_behind_proxy().await;
    conflicting.cancel(10);
    let err = reserve(&ledger, &SCOPES).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert_eq!(conflicting.seen(), 4, "sent once and again three times");
    conflicting.assert_tokens_differ();
    assert_eq!(
        ledger.bucket_usage(&SCOPES.map(bucket)).await.unwrap(),
        [0, 0]
    );
}

#[tokio::test]
async fn a_failed_condition_is_answered_at_once_not_sent_again() {
    let (ledger, conflicting) = ledger_behind_proxy().await;
    assert_eq!(reserve(&ledger, &SCOPES).await.unwrap(), Reserve::Reserved);
    conflicting.cancel(0);
    // 1,000 more would pass the cap of 1,500: moto cancels it for the condition.
    let tripped = reserve(&ledger, &SCOPES).await.unwrap();
    assert!(matches!(tripped, Reserve::Tripped { .. }), "{tripped:?}");
    assert_eq!(
        conflicting.seen(),
        1,
        "a refused condition is not sent again"
    );
}
