//! `GET /api/usage`: the signed-in (or local) user's budget meter. The web chat shows it only when a bucket
//! is at least 80% full.

use super::App;
use super::errors::ApiError;
use crate::auth::CurrentUser;
use axum::Json;
use axum::extract::State;
use budget::Meter;
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
