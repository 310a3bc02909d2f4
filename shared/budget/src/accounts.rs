//! Paused accounts: answered without a model call.

use crate::lines;
use async_trait::async_trait;
use engine::{Denied, Guard, GuardCall, Permit};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use store::StoreError;
use transcript::UserId;

/// Whether a user's account is paused. The accounts store implements it; [`InMemoryAccounts`]
/// is the in-process version (tests, the local server).
#[async_trait]
pub trait AccountStatus: Send + Sync {
    async fn is_paused(&self, user: &UserId) -> Result<bool, StoreError>;
}

/// Paused users held in memory.
#[derive(Debug, Default)]
pub struct InMemoryAccounts {
    paused: Mutex<HashSet<UserId>>,
}

impl InMemoryAccounts {
    pub fn pause(&self, user: &UserId) {
        self.lock().insert(user.clone());
    }

    pub fn resume(&self, user: &UserId) {
        self.lock().remove(user);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<UserId>> {
        self.paused.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl AccountStatus for InMemoryAccounts {
    async fn is_paused(&self, user: &UserId) -> Result<bool, StoreError> {
        Ok(self.lock().contains(user))
    }
}

/// Denies every model call of a paused account with a calm sentence. An account whose status
/// cannot be read is treated as not checkable: denied too (fails closed).
pub struct PausedAccounts(pub Arc<dyn AccountStatus>);

impl std::fmt::Debug for PausedAccounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PausedAccounts").finish_non_exhaustive()
    }
}

#[async_trait]
impl Guard for PausedAccounts {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied> {
        match self.0.is_paused(&call.conversation.user_id).await {
            Ok(false) => Ok(Permit::default()),
            Ok(true) => Err(Denied {
                reason: "account:paused".into(),
                user_message: lines::ACCOUNT_PAUSED.to_owned(),
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

/// The accounts store as the guard sees it: an account that is not active (paused or closed)
/// is held; an unknown user is not (the identity layer decides who may talk at all).
pub struct StoreAccounts(pub Arc<dyn store::Accounts>);

impl std::fmt::Debug for StoreAccounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreAccounts").finish_non_exhaustive()
    }
}

#[async_trait]
impl AccountStatus for StoreAccounts {
    async fn is_paused(&self, user: &UserId) -> Result<bool, StoreError> {
        Ok(self
            .0
            .account(user)
            .await?
            .is_some_and(|a| a.status != store::AccountStatus::Active))
    }
}
