//! Paused and closed accounts: answered without a model call, each with its own sentence.

use crate::lines;
use async_trait::async_trait;
use engine::{Denied, Guard, GuardCall, Permit};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use store::{AccountStatus as Status, StoreError};
use transcript::UserId;

/// A user's account status as the guard sees it: `None` for an account it does not know (the
/// identity layer decides who may talk at all). The accounts store implements it;
/// [`InMemoryAccounts`] is the in-process version (tests, the local server).
#[async_trait]
pub trait AccountStatus: Send + Sync {
    async fn status(&self, user: &UserId) -> Result<Option<Status>, StoreError>;
}

/// Paused and closed users held in memory; everyone else is active.
#[derive(Debug, Default)]
pub struct InMemoryAccounts {
    held: Mutex<HashMap<UserId, Status>>,
}

impl InMemoryAccounts {
    pub fn pause(&self, user: &UserId) {
        self.lock().insert(user.clone(), Status::Paused);
    }

    pub fn close(&self, user: &UserId) {
        self.lock().insert(user.clone(), Status::Closed);
    }

    pub fn resume(&self, user: &UserId) {
        self.lock().remove(user);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<UserId, Status>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl AccountStatus for InMemoryAccounts {
    async fn status(&self, user: &UserId) -> Result<Option<Status>, StoreError> {
        Ok(Some(
            self.lock().get(user).copied().unwrap_or(Status::Active),
        ))
    }
}

/// Denies every model call of a paused or a closed account, each with its own calm sentence (a
/// pause is for now; a closed account is not coming back). An account whose status cannot be
/// read is treated as not checkable: denied too (fails closed).
pub struct PausedAccounts(pub Arc<dyn AccountStatus>);

impl std::fmt::Debug for PausedAccounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PausedAccounts").finish_non_exhaustive()
    }
}

#[async_trait]
impl Guard for PausedAccounts {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied> {
        match self.0.status(&call.conversation.user_id).await {
            Ok(None | Some(Status::Active)) => Ok(Permit::default()),
            Ok(Some(Status::Paused)) => Err(Denied {
                reason: "account:paused".into(),
                user_message: lines::ACCOUNT_PAUSED.to_owned(),
            }),
            Ok(Some(Status::Closed)) => Err(Denied {
                reason: "account:closed".into(),
                user_message: lines::ACCOUNT_CLOSED.to_owned(),
            }),
            Err(err) => {
                tracing::error!(error = %err, "account status unavailable; no model call");
                Err(Denied {
                    reason: "account:unavailable".into(),
                    user_message: lines::CANNOT_CHECK.to_owned(),
                })
            }
        }
    }
}

/// The accounts store as the guard sees it: each account's stored status; an unknown user is
/// not held (the identity layer decides who may talk at all).
pub struct StoreAccounts(pub Arc<dyn store::Accounts>);

impl std::fmt::Debug for StoreAccounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreAccounts").finish_non_exhaustive()
    }
}

#[async_trait]
impl AccountStatus for StoreAccounts {
    async fn status(&self, user: &UserId) -> Result<Option<Status>, StoreError> {
        Ok(self.0.account(user).await?.map(|a| a.status))
    }
}
