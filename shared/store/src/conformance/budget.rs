//! Conformance checks of the [`BudgetLedger`](crate::BudgetLedger) port.

use crate::{Adjustment, BucketKey, BucketUsage, Charge, Reserve, Store};

const HOUR_MS: i64 = 3_600_000;

fn key(scope: &str, window: &str, start_ms: i64) -> BucketKey {
    BucketKey {
        scope: scope.into(),
        window: window.into(),
        start_ms,
    }
}

fn charge(bucket: &BucketKey, amount: u64, limit: Option<u64>) -> Charge {
    Charge {
        bucket: bucket.clone(),
        amount,
        limit,
        expires_at_ms: bucket.start_ms + HOUR_MS,
    }
}

fn adjust(bucket: &BucketKey, delta: i64) -> Adjustment {
    Adjustment {
        bucket: bucket.clone(),
        delta,
        expires_at_ms: bucket.start_ms + HOUR_MS,
    }
}

/// Reservations add to every bucket; settling adds real minus reserved (negative included);
/// a bucket never written reads 0; buckets of other starts, windows and scopes are apart.
pub async fn check_budget_reserve_and_settle(store: &dyn Store) {
    let t = 1_800_000_000_000;
    let minute = key("user:ana#1", "tokens_1m", t);
    let usd = key("user:ana#1", "usd_30d", t);
    let next_minute = key("user:ana#1", "tokens_1m", t + 60_000);
    let other_user = key("user:bo", "tokens_1m", t);

    let got = store
        .reserve(&[charge(&minute, 1_000, Some(5_000)), charge(&usd, 70, None)])
        .await
        .unwrap();
    assert_eq!(got, Reserve::Reserved);
    store
        .reserve(&[charge(&minute, 500, Some(5_000))])
        .await
        .unwrap();
    let read = store
        .bucket_usage(&[
            minute.clone(),
            usd.clone(),
            next_minute.clone(),
            other_user.clone(),
        ])
        .await
        .unwrap();
    assert_eq!(
        read,
        vec![1_500, 70, 0, 0],
        "reserved amounts, untouched neighbours"
    );

    // Settle: the first call used 800 tokens (reserved 1,000), the second 900 (reserved 500).
    store
        .adjust(&[adjust(&minute, -200), adjust(&usd, 15)])
        .await
        .unwrap();
    store.adjust(&[adjust(&minute, 400)]).await.unwrap();
    let read = store
        .bucket_usage(&[minute.clone(), usd.clone()])
        .await
        .unwrap();
    assert_eq!(read, vec![1_700, 85], "real usage after settling");
    let read = store
        .bucket_usage(&[
            usd.clone(),
            next_minute.clone(),
            minute.clone(),
            usd.clone(),
        ])
        .await
        .unwrap();
    assert_eq!(
        read,
        vec![85, 0, 1_700, 85],
        "in the order asked, a bucket asked twice answered twice"
    );

    // Settling may push a bucket over its cap (the one allowed overshoot); a reservation then
    // trips.
    store.adjust(&[adjust(&minute, 3_400)]).await.unwrap();
    let tripped = store
        .reserve(&[charge(&minute, 1, Some(5_000))])
        .await
        .unwrap();
    assert_eq!(
        tripped,
        Reserve::Tripped {
            bucket: minute.clone(),
            used: 5_100,
            limit: 5_000
        }
    );

    // An adjustment of a bucket never written starts it from 0.
    store.adjust(&[adjust(&next_minute, 42)]).await.unwrap();
    assert_eq!(store.bucket_usage(&[next_minute]).await.unwrap(), vec![42]);
}

/// When one bucket would pass its cap, nothing is added anywhere and that bucket is named.
/// Filling a bucket exactly to its cap fits.
pub async fn check_budget_trip_adds_nothing(store: &dyn Store) {
    let t = 1_800_000_000_000;
    let user_hour = key("user:ana", "tokens_1h", t);
    let user_usd = key("user:ana", "usd_30d", t);
    let global = key("global", "usd_30d", t);
    store
        .reserve(&[charge(&global, 900, Some(1_000))])
        .await
        .unwrap();

    let got = store
        .reserve(&[
            charge(&user_hour, 50, Some(100)),
            charge(&user_usd, 200, Some(10_000)),
            charge(&global, 200, Some(1_000)),
        ])
        .await
        .unwrap();
    assert_eq!(
        got,
        Reserve::Tripped {
            bucket: global.clone(),
            used: 900,
            limit: 1_000
        },
        "the global bucket trips"
    );
    let read = store
        .bucket_usage(&[user_hour.clone(), user_usd.clone(), global.clone()])
        .await
        .unwrap();
    assert_eq!(read, vec![0, 0, 900], "a tripped reservation adds nothing");

    // Exactly to the cap fits; one more does not.
    let exact = store
        .reserve(&[
            charge(&user_hour, 100, Some(100)),
            charge(&global, 100, Some(1_000)),
        ])
        .await
        .unwrap();
    assert_eq!(exact, Reserve::Reserved, "used + amount == cap fits");
    let over = store
        .reserve(&[charge(&user_hour, 1, Some(100))])
        .await
        .unwrap();
    assert!(
        matches!(over, Reserve::Tripped { ref bucket, used: 100, limit: 100 } if *bucket == user_hour),
        "{over:?}"
    );
    // A charge larger than an empty bucket's whole cap can never fit.
    let huge = key("user:cy", "tokens_1m", t);
    let got = store
        .reserve(&[charge(&huge, 101, Some(100))])
        .await
        .unwrap();
    assert!(matches!(got, Reserve::Tripped { used: 0, .. }), "{got:?}");
    assert_eq!(store.bucket_usage(&[huge]).await.unwrap(), vec![0]);
}

/// A report lists every scope's bucket of one window kind and start, and nothing else.
pub async fn check_budget_buckets_of_window(store: &dyn Store) {
    let t = 1_800_000_000_000;
    for (scope, amount) in [("user:b", 20), ("global", 50), ("user:a", 30)] {
        store
            .reserve(&[charge(&key(scope, "usd_30d", t), amount, None)])
            .await
            .unwrap();
    }
    store
        .reserve(&[
            charge(&key("user:a", "usd_30d", t - HOUR_MS), 7, None),
            charge(&key("user:a", "tokens_1h", t), 7, None),
        ])
        .await
        .unwrap();
    let got = store.buckets_of_window("usd_30d", t).await.unwrap();
    let want: Vec<BucketUsage> = [("global", 50), ("user:a", 30), ("user:b", 20)]
        .into_iter()
        .map(|(scope, used)| BucketUsage {
            bucket: key(scope, "usd_30d", t),
            used,
        })
        .collect();
    assert_eq!(got, want, "ordered by scope, only that window and start");
    assert!(
        store
            .buckets_of_window("tokens_1m", t)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Sixteen concurrent reservations against caps that fit five: exactly five succeed and no
/// bucket passes its cap, the user's nor the shared global one.
pub async fn check_concurrent_reservations(store: &dyn Store) {
    const CALLERS: usize = 16;
    let t = 1_800_000_000_000;
    let user = key("user:ana", "tokens_1m", t);
    let global = key("global", "usd_30d", t);
    let runtime = tokio::runtime::Handle::current();
    let barrier = std::sync::Barrier::new(CALLERS);
    let outcomes: Vec<Reserve> = tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..CALLERS)
                .map(|_| {
                    let (runtime, barrier) = (&runtime, &barrier);
                    let charges = [
                        charge(&user, 1_000, Some(5_000)),
                        charge(&global, 10, Some(1_000_000)),
                    ];
                    scope.spawn(move || {
                        barrier.wait();
                        runtime.block_on(store.reserve(&charges)).unwrap()
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("caller thread panicked"))
                .collect()
        })
    });
    let reserved = outcomes.iter().filter(|o| **o == Reserve::Reserved).count();
    assert_eq!(reserved, 5, "exactly the five that fit: {outcomes:?}");
    for o in &outcomes {
        if let Reserve::Tripped { bucket, limit, .. } = o {
            assert_eq!((bucket, *limit), (&user, 5_000), "the user bucket trips");
        }
    }
    let read = store.bucket_usage(&[user, global]).await.unwrap();
    assert_eq!(
        read,
        vec![5_000, 50],
        "no overshoot; tripped calls added nothing"
    );
}
