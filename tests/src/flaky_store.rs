use async_trait::async_trait;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use store::{
    Claim, ConversationStore, Identities, JobClaims, MessageStore, StoreError, VisibleEntry,
    VisibleStore,
};
use store_sqlite::SqliteStore;
use transcript::{Conversation, ConversationId, Message, UserId};

/// A real SQLite store whose message appends start failing after a set number of successes,
/// the way a worker looks to the transcript when it dies mid-turn.
#[derive(Debug)]
pub struct FlakyStore {
    pub inner: Arc<SqliteStore>,
    /// Appends still allowed; below zero means "never fail".
    appends_left: AtomicI64,
    /// Tool-result writes still allowed; below zero means "never fail".
    results_left: AtomicI64,
    /// Domain record reads fail while set (storage gone for reads).
    records_unreadable: AtomicBool,
    /// The next undo finds another undo of its user landed just before it.
    undo_elsewhere_first: AtomicBool,
    /// The next conditional bind finds its account bound to this user (`None`: unbound) just
    /// before it.
    bound_elsewhere_first: std::sync::Mutex<Option<Option<UserId>>>,
    /// Conditional binds fail while set (storage gone for a linking job's write).
    binds_fail: AtomicBool,
}

impl FlakyStore {
    pub fn new(inner: Arc<SqliteStore>) -> Self {
        Self {
            inner,
            appends_left: AtomicI64::new(-1),
            results_left: AtomicI64::new(-1),
            records_unreadable: AtomicBool::new(false),
            undo_elsewhere_first: AtomicBool::new(false),
            bound_elsewhere_first: std::sync::Mutex::new(None),
            binds_fail: AtomicBool::new(false),
        }
    }

    /// Make every conditional bind fail (`true`) or go through again (`false`).
    pub fn fail_binds(&self, fail: bool) {
        self.binds_fail.store(fail, Ordering::SeqCst);
    }

    /// Just before the next conditional bind (a linking job's), its account is bound to `user`
    /// by someone else, or unbound when `None`: the same sender's job in another chat linking
    /// it first, or an operator's unlink, between the job's read and its write.
    pub fn bound_elsewhere_first(&self, user: Option<UserId>) {
        *self.bound_elsewhere_first.lock().unwrap() = Some(user);
    }

    /// Just before the next undo, another undo of the same user (the user's own, reaching any
    /// conversation) lands first: two undoers of one stack, which a conversation's lease keeps
    /// apart unless it lapsed.
    pub fn undo_elsewhere_first(&self) {
        self.undo_elsewhere_first.store(true, Ordering::SeqCst);
    }

    /// Fail every domain record read (`record`, `next_undo`) until [`FlakyStore::heal`].
    pub fn fail_record_reads(&self) {
        self.records_unreadable.store(true, Ordering::SeqCst);
    }

    fn record_read(&self) -> Result<(), StoreError> {
        match self.records_unreadable.load(Ordering::SeqCst) {
            true => Err(StoreError::Unavailable("records unreadable".into())),
            false => Ok(()),
        }
    }

    /// Let `n` more message appends through, then fail every one after.
    pub fn fail_after(&self, n: i64) {
        self.appends_left.store(n, Ordering::SeqCst);
    }

    /// Let `n` more tool-result writes through, then fail every one after (the worker died
    /// after a tool's effect, before its result was recorded).
    pub fn fail_results_after(&self, n: i64) {
        self.results_left.store(n, Ordering::SeqCst);
    }

    pub fn heal(&self) {
        self.appends_left.store(-1, Ordering::SeqCst);
        self.results_left.store(-1, Ordering::SeqCst);
        self.records_unreadable.store(false, Ordering::SeqCst);
    }
}

#[async_trait]
impl MessageStore for FlakyStore {
    async fn append_message(&self, message: &Message) -> Result<(), StoreError> {
        let left = self.appends_left.load(Ordering::SeqCst);
        if left == 0 {
            return Err(StoreError::Unavailable("the worker died here".into()));
        }
        if left > 0 {
            self.appends_left.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.append_message(message).await
    }
    /// One append, as the store makes it one write.
    async fn start_turn(
        &self,
        conversation: &Conversation,
        message: &Message,
        entry: &VisibleEntry,
    ) -> Result<(), StoreError> {
        let left = self.appends_left.load(Ordering::SeqCst);
        if left == 0 {
            return Err(StoreError::Unavailable("the worker died here".into()));
        }
        if left > 0 {
            self.appends_left.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.start_turn(conversation, message, entry).await
    }
    async fn messages(&self, c: &ConversationId, segment: u32) -> Result<Vec<Message>, StoreError> {
        self.inner.messages(c, segment).await
    }
    async fn next_position(&self, c: &ConversationId) -> Result<u64, StoreError> {
        self.inner.next_position(c).await
    }
}

#[async_trait]
impl ConversationStore for FlakyStore {
    async fn create_conversation(&self, c: &Conversation) -> Result<(), StoreError> {
        self.inner.create_conversation(c).await
    }
    async fn conversation(&self, id: &ConversationId) -> Result<Option<Conversation>, StoreError> {
        self.inner.conversation(id).await
    }
    async fn update_conversation(&self, c: &Conversation) -> Result<(), StoreError> {
        self.inner.update_conversation(c).await
    }
    async fn conversations_of(&self, user: &UserId) -> Result<Vec<Conversation>, StoreError> {
        self.inner.conversations_of(user).await
    }
}

#[async_trait]
impl VisibleStore for FlakyStore {
    async fn append_visible(&self, e: &VisibleEntry) -> Result<(), StoreError> {
        self.inner.append_visible(e).await
    }
    async fn visible(&self, c: &ConversationId) -> Result<Vec<VisibleEntry>, StoreError> {
        self.inner.visible(c).await
    }
    async fn next_visible_position(&self, c: &ConversationId) -> Result<u64, StoreError> {
        self.inner.next_visible_position(c).await
    }
}

#[async_trait]
impl JobClaims for FlakyStore {
    async fn claim_job(&self, key: &str, now: i64, until: i64) -> Result<Claim, StoreError> {
        self.inner.claim_job(key, now, until).await
    }
    async fn finish_job(&self, key: &str, keep_until: i64) -> Result<(), StoreError> {
        self.inner.finish_job(key, keep_until).await
    }
    async fn release_job(
        &self,
        key: &str,
        attempt: u32,
        now: i64,
        sent: Option<&store::ReplySent>,
    ) -> Result<(), StoreError> {
        self.inner.release_job(key, attempt, now, sent).await
    }
    async fn reply_sent(&self, key: &str) -> Result<Option<store::ReplySent>, StoreError> {
        self.inner.reply_sent(key).await
    }
}

#[async_trait]
impl store::Retention for FlakyStore {
    async fn expire_conversation(
        &self,
        conversation: &ConversationId,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.inner
            .expire_conversation(conversation, until_ms, now_ms)
            .await
    }
    async fn sweep_expired(&self, now_ms: i64) -> Result<u64, StoreError> {
        self.inner.sweep_expired(now_ms).await
    }
}

#[async_trait]
impl store::Leases for FlakyStore {
    async fn acquire_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
        now: i64,
        until: i64,
    ) -> Result<store::Lease, StoreError> {
        self.inner
            .acquire_lease(conversation, holder, now, until)
            .await
    }
    async fn release_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
    ) -> Result<(), StoreError> {
        self.inner.release_lease(conversation, holder).await
    }
}

#[async_trait]
impl store::ToolResults for FlakyStore {
    async fn put_tool_result(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
        tool_use_id: &str,
        result: &transcript::Part,
    ) -> Result<(), StoreError> {
        let left = self.results_left.load(Ordering::SeqCst);
        if left == 0 {
            return Err(StoreError::Unavailable("the worker died here".into()));
        }
        if left > 0 {
            self.results_left.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner
            .put_tool_result(conversation, asked_at, tool_use_id, result)
            .await
    }
    async fn tool_results(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
    ) -> Result<std::collections::HashMap<String, transcript::Part>, StoreError> {
        self.inner.tool_results(conversation, asked_at).await
    }
    async fn receipt(&self, call_key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.inner.receipt(call_key).await
    }
}

#[async_trait]
impl store::Sessions for FlakyStore {
    async fn put_session(&self, session: &store::Session) -> Result<(), StoreError> {
        self.inner.put_session(session).await
    }
    async fn session(&self, id_hash: &str, now: i64) -> Result<Option<store::Session>, StoreError> {
        self.inner.session(id_hash, now).await
    }
    async fn delete_session(&self, id_hash: &str) -> Result<(), StoreError> {
        self.inner.delete_session(id_hash).await
    }
    async fn first_use_of_login(
        &self,
        state: &str,
        now_ms: i64,
        keep_until_ms: i64,
    ) -> Result<bool, StoreError> {
        self.inner
            .first_use_of_login(state, now_ms, keep_until_ms)
            .await
    }
}

#[async_trait]
impl Identities for FlakyStore {
    async fn create_link_code(
        &self,
        code: &str,
        user: &UserId,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.inner
            .create_link_code(code, user, now, expires_at)
            .await
    }
    async fn create_link_code_for(
        &self,
        code: &str,
        user: &UserId,
        redeemer: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.inner
            .create_link_code_for(code, user, redeemer, now, expires_at)
            .await
    }
    async fn link_code_redeemed_at(&self, code: &str) -> Result<Option<i64>, StoreError> {
        self.inner.link_code_redeemed_at(code).await
    }
    async fn link_code_expires_at(&self, code: &str) -> Result<Option<i64>, StoreError> {
        self.inner.link_code_expires_at(code).await
    }
    async fn consume_link_code(
        &self,
        code: &str,
        redeemer: &str,
        now: i64,
    ) -> Result<Option<UserId>, StoreError> {
        self.inner.consume_link_code(code, redeemer, now).await
    }
    async fn bind_identity(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
        now: i64,
    ) -> Result<(), StoreError> {
        self.inner
            .bind_identity(channel, external_id, user, now)
            .await
    }
    async fn bind_identity_if(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
        was: Option<&UserId>,
        now: i64,
    ) -> Result<(), StoreError> {
        if self.binds_fail.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("binds fail".into()));
        }
        let elsewhere = self.bound_elsewhere_first.lock().unwrap().take();
        match elsewhere {
            Some(Some(other)) => {
                self.inner
                    .bind_identity(channel, external_id, &other, now)
                    .await?
            }
            Some(None) => {
                self.inner.unbind_identity(channel, external_id).await?;
            }
            None => {}
        }
        self.inner
            .bind_identity_if(channel, external_id, user, was, now)
            .await
    }
    async fn identity(
        &self,
        channel: &str,
        external_id: &str,
    ) -> Result<Option<UserId>, StoreError> {
        self.inner.identity(channel, external_id).await
    }
    async fn bindings(&self, user: Option<&UserId>) -> Result<Vec<store::Binding>, StoreError> {
        self.inner.bindings(user).await
    }
    async fn unbind_identity_if(
        &self,
        channel: &str,
        external_id: &str,
        bound_by_ms: i64,
    ) -> Result<Option<UserId>, StoreError> {
        self.inner
            .unbind_identity_if(channel, external_id, bound_by_ms)
            .await
    }

    async fn unbind_identity_of(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
    ) -> Result<bool, StoreError> {
        self.inner
            .unbind_identity_of(channel, external_id, user)
            .await
    }
}

// The domain ports pass straight through, but for record reads when told to fail.

#[async_trait]
impl store::Records for FlakyStore {
    async fn record(&self, kind: &str, id: &str) -> Result<Option<store::Record>, StoreError> {
        self.record_read()?;
        self.inner.record(kind, id).await
    }
    async fn records_of(
        &self,
        owner: &UserId,
        kind: &str,
    ) -> Result<Vec<store::Record>, StoreError> {
        self.inner.records_of(owner, kind).await
    }
    async fn commit(&self, commit: &store::ActionCommit) -> Result<(), StoreError> {
        self.inner.commit(commit).await
    }
    async fn undo_last(&self, undo: &store::UndoRequest) -> Result<store::UndoOutcome, StoreError> {
        if self.undo_elsewhere_first.swap(false, Ordering::SeqCst) {
            let elsewhere = store::UndoRequest {
                scope: store::UndoScope::Anywhere,
                action_id: format!("{}-elsewhere", undo.action_id),
                actor: store::ActorKind::User,
                conversation: None,
                receipt: None,
                ..undo.clone()
            };
            self.inner.undo_last(&elsewhere).await?;
        }
        self.inner.undo_last(undo).await
    }
    async fn next_undo(
        &self,
        user: &UserId,
        scope: &store::UndoScope,
    ) -> Result<Vec<store::AuditEntry>, StoreError> {
        self.record_read()?;
        self.inner.next_undo(user, scope).await
    }
    async fn audit_log(&self, user: &UserId) -> Result<Vec<store::AuditEntry>, StoreError> {
        self.inner.audit_log(user).await
    }
}

#[async_trait]
impl store::Confirmations for FlakyStore {
    async fn put_pending(&self, pending: &store::Pending) -> Result<(), StoreError> {
        self.inner.put_pending(pending).await
    }
    async fn take_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        current_action: &str,
        now_ms: i64,
    ) -> Result<Option<store::Pending>, StoreError> {
        self.inner
            .take_pending(conversation, hash, current_action, now_ms)
            .await
    }
    async fn read_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        now_ms: i64,
    ) -> Result<Option<store::Pending>, StoreError> {
        self.inner.read_pending(conversation, hash, now_ms).await
    }
}

#[async_trait]
impl store::Accounts for FlakyStore {
    async fn account(&self, user: &UserId) -> Result<Option<store::Account>, StoreError> {
        self.inner.account(user).await
    }
    async fn account_by_email(
        &self,
        email: &store::Email,
    ) -> Result<Option<store::Account>, StoreError> {
        self.inner.account_by_email(email).await
    }
    async fn accounts_page(
        &self,
        after: Option<&store::AccountCursor>,
        limit: usize,
    ) -> Result<store::AccountPage, StoreError> {
        self.inner.accounts_page(after, limit).await
    }
    async fn create_account(
        &self,
        account: &store::Account,
    ) -> Result<(), store::CreateAccountError> {
        self.inner.create_account(account).await
    }
    async fn put_account(&self, account: &store::Account) -> Result<(), StoreError> {
        self.inner.put_account(account).await
    }
    async fn set_account_status(
        &self,
        user: &UserId,
        status: store::AccountStatus,
    ) -> Result<(), StoreError> {
        self.inner.set_account_status(user, status).await
    }
}

#[async_trait]
impl store::ActiveRecords for FlakyStore {
    async fn set_active(
        &self,
        conversation: &ConversationId,
        kind: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        self.inner.set_active(conversation, kind, id).await
    }
    async fn active(
        &self,
        conversation: &ConversationId,
        kind: &str,
    ) -> Result<Option<String>, StoreError> {
        self.inner.active(conversation, kind).await
    }
    async fn records_with_active(
        &self,
        owner: &UserId,
        kind: &str,
        conversation: &ConversationId,
    ) -> Result<(Vec<store::Record>, Option<String>), StoreError> {
        self.inner
            .records_with_active(owner, kind, conversation)
            .await
    }
}

#[async_trait]
impl store::BudgetLedger for FlakyStore {
    async fn reserve(&self, charges: &[store::Charge]) -> Result<store::Reserve, StoreError> {
        self.inner.reserve(charges).await
    }
    async fn adjust(&self, adjustments: &[store::Adjustment]) -> Result<(), StoreError> {
        self.inner.adjust(adjustments).await
    }
    async fn bucket_usage(&self, buckets: &[store::BucketKey]) -> Result<Vec<u64>, StoreError> {
        self.inner.bucket_usage(buckets).await
    }
    async fn buckets_of_window(
        &self,
        window: &str,
        start_ms: i64,
    ) -> Result<Vec<store::BucketUsage>, StoreError> {
        self.inner.buckets_of_window(window, start_ms).await
    }
}
