//! Paused and closed accounts: answered without a model call, each with its own sentence.

use crate::lines;
use async_trait::async_trait;
use engine::{Denied, Guard, GuardCall, Permit};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use store::{AccountStatus as Status, StoreError};
use transcript::{ConversationId, UserId};

/// A user's account status as the guard sees it: `None` for an account it does not know (the
/// identity layer decides who may talk at all). The accounts store implements it;
/// [`InMemoryAccounts`] is the in-process version (tests, the local server).
#[async_trait]
pub trait AccountStatus: Send + Sync {
    async fn status(&self, user: &UserId) -> Result<Option<Status>, StoreError>;

    /// The status in `account` as the turn read it from the store, when that is this source's
    /// answer (the store's own accounts); `None`: ask [`AccountStatus::status`].
    fn as_read(&self, _account: &store::Account) -> Option<Status> {
        None
    }
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
///
/// The status is read once per turn: the first model call of a conversation's turn reads it,
/// the turn's later calls (after tools) reuse it. Pausing an account takes effect from its
/// next turn.
pub struct PausedAccounts(pub Arc<dyn AccountStatus>, pub StatusOfTurn);

impl PausedAccounts {
    pub fn new(accounts: Arc<dyn AccountStatus>) -> Self {
        Self(accounts, StatusOfTurn::default())
    }

    /// The status for `call`: remembered for its conversation's turn, or read.
    async fn status(&self, call: &GuardCall<'_>) -> Result<Option<Status>, StoreError> {
        let conv = call.conversation;
        let key = (conv.id.clone(), conv.turn);
        if let Some(status) = self.1.lock().get(&key.0).filter(|(t, _)| *t == key.1) {
            return Ok(status.1);
        }
        let status = match call.account.and_then(|a| self.0.as_read(a)) {
            Some(status) => Some(status),
            None => self.0.status(&conv.user_id).await?,
        };
        let mut held = self.1.lock();
        if held.len() >= REMEMBERED_TURNS && !held.contains_key(&key.0) {
            held.clear();
        }
        held.insert(key.0, (key.1, status));
        Ok(status)
    }
}

/// Conversations whose turn's account status is remembered at once.
const REMEMBERED_TURNS: usize = 1_024;

/// Each conversation's current turn and the account status read for it.
#[derive(Debug, Default)]
pub struct StatusOfTurn(Mutex<HashMap<ConversationId, (u64, Option<Status>)>>);

impl StatusOfTurn {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConversationId, (u64, Option<Status>)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for PausedAccounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PausedAccounts").finish_non_exhaustive()
    }
}

#[async_trait]
impl Guard for PausedAccounts {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied> {
        match self.status(call).await {
            Ok(None | Some(Status::Active)) => Ok(Permit::default()),
            Ok(Some(Status::Paused)) => Err(Denied {
                kind: engine::DeniedKind::Account,
                reason: "account:paused".into(),
                user_message: lines::ACCOUNT_PAUSED.to_owned(),
            }),
            Ok(Some(Status::Closed)) => Err(Denied {
                kind: engine::DeniedKind::Account,
                reason: "account:closed".into(),
                user_message: lines::ACCOUNT_CLOSED.to_owned(),
            }),
            Err(err) => {
                tracing::error!(error = %err, "account status unavailable; no model call");
                Err(Denied {
                    kind: engine::DeniedKind::Unchecked,
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

    fn as_read(&self, account: &store::Account) -> Option<Status> {
        Some(account.status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use transcript::Conversation;

    /// Counts its reads; the status of `held`.
    #[derive(Default)]
    struct Counted {
        reads: AtomicUsize,
        held: InMemoryAccounts,
    }

    #[async_trait]
    impl AccountStatus for Counted {
        async fn status(&self, user: &UserId) -> Result<Option<Status>, StoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.held.status(user).await
        }
    }

    async fn ask(guard: &PausedAccounts, conv: &Conversation, n: u32) -> Result<Permit, Denied> {
        let request = backend::ChatRequest {
            model: "m".into(),
            system: String::new(),
            messages: Vec::new(),
            tools: Arc::new([]),
            settings: Default::default(),
        };
        guard
            .before_model_call(&GuardCall {
                conversation: conv,
                call_number: n,
                request: &request,
                account: None,
            })
            .await
    }

    #[tokio::test]
    async fn the_status_is_read_once_per_turn_and_a_pause_holds_from_the_next() {
        let accounts = Arc::new(Counted::default());
        let guard = PausedAccounts::new(accounts.clone());
        let mut conv = Conversation::new("c", "ana", "web", "chat");
        conv.turn = 1;
        for n in 1..=3 {
            assert!(ask(&guard, &conv, n).await.is_ok());
        }
        assert_eq!(
            accounts.reads.load(Ordering::SeqCst),
            1,
            "one read for the turn"
        );
        accounts.held.pause(&"ana".into());
        conv.turn = 2;
        let denied = ask(&guard, &conv, 1).await.unwrap_err();
        assert_eq!(denied.reason, "account:paused");
        assert_eq!(
            accounts.reads.load(Ordering::SeqCst),
            2,
            "the next turn reads again"
        );
        let other = Conversation::new("d", "ana", "web", "chat");
        assert!(
            ask(&guard, &other, 1).await.is_err(),
            "another conversation reads its own"
        );
    }

    /// The store's accounts as the turn read them: no read of its own; a source that is not
    /// the store (here, in memory) still answers for itself.
    #[tokio::test]
    async fn the_turns_own_read_of_the_account_is_the_stores_answer() {
        let store = Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap());
        let guard = PausedAccounts::new(Arc::new(StoreAccounts(store)));
        let conv = Conversation::new("c", "ana", "web", "chat");
        let request = backend::ChatRequest {
            model: "m".into(),
            system: String::new(),
            messages: Vec::new(),
            tools: Arc::new([]),
            settings: Default::default(),
        };
        let paused = store::Account {
            status: Status::Paused,
            ..store::Account::new("ana", "Ana")
        };
        let call = GuardCall {
            conversation: &conv,
            call_number: 1,
            request: &request,
            account: Some(&paused),
        };
        // Not in the store at all: the status came from the turn's read.
        let denied = guard.before_model_call(&call).await.unwrap_err();
        assert_eq!(denied.reason, "account:paused");

        let in_memory = PausedAccounts::new(Arc::new(InMemoryAccounts::default()));
        assert!(in_memory.before_model_call(&call).await.is_ok());
    }
}
