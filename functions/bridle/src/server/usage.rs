//! `GET /api/usage`: the signed-in (or local) user's budget meter. The web chat shows it only when a bucket
//! is at least 80% full. Everyone's 30-day dollars appear only once full.

use super::App;
use super::errors::ApiError;
use crate::auth::CurrentUser;
use axum::Json;
use axum::extract::State;
use budget::{Bucket, Meter};
use serde_json::{Value, json};
use std::sync::Arc;
use store::BudgetLedger;

pub async fn usage(State(app): State<App>, current: CurrentUser) -> Result<Json<Value>, ApiError> {
    let ledger: Arc<dyn BudgetLedger> = app.store.clone();
    let meter = Meter::new(ledger, app.budget.clone());
    let fill = meter
        .fill(&current.user, (app.clock)())
        .await
        .map_err(ApiError::internal)?;
    // Everyone's dollars are the operator's figure, not the user's: shown only once full (the
    // user is refused for it), never how full, which any account could follow over time.
    let fill: Vec<_> = fill
        .into_iter()
        .filter(|f| f.bucket != Bucket::GlobalUsd30d || f.fraction >= 1.0)
        .map(|mut f| {
            if f.bucket == Bucket::GlobalUsd30d {
                f.fraction = 1.0;
            }
            f
        })
        .collect();
    let show = fill.iter().any(|f| f.fraction >= Meter::SHOW_FROM);
    let buckets: Vec<Value> = fill
        .iter()
        .filter(|f| f.cap.is_some())
        .map(|f| {
            json!({
                "bucket": f.bucket,
                "fraction": f.fraction,
                "resets_at_ms": f.resets_at_ms,
            })
        })
        .collect();
    Ok(Json(
        json!({ "show": show, "show_from": Meter::SHOW_FROM, "buckets": buckets }),
    ))
}
