//! Polling for what another task writes after the moment a test can observe (a reply the
//! platform received is recorded in the transcript just after it was sent).

use std::time::Duration;

/// Poll until `f` yields `Some`, or fail with `what` after 10 s.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..200 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}
