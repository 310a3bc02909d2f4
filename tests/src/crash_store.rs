//! A store that "crashes" at a chosen write, for fault injection: it wraps a real store (SQLite
//! or DynamoDB), counts every write, and at write N either fails that write (the process died
//! before it) or lets it through and fails the caller (the process died right after it); from
//! then on every operation fails, reads included, as a dead worker does nothing more. The same
//! [`Crash`] can be shared with the model and the sender, so nothing outside the store happens
//! after the crash either.

use async_trait::async_trait;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use store::{
    Adjustment, Charge, Claim, ClaimWithLease, ClaimedWithLease, ConversationStore, Identities,
    JobClaims, MessageStore, StartRead, Store, StoreError, TurnFinish, TurnWrites, VisibleEntry,
    VisibleStore,
};
use transcript::{Conversation, ConversationId, Message, Part, UserId};

/// Where the crash comes, relative to write number `at` (1-based, in order of the writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashAt {
    /// Write `at` never happens.
    Before(u64),
    /// Write `at` happens; its caller never learns it.
    After(u64),
    /// The first write of this name happens; its caller never learns it.
    AfterFirst(&'static str),
    /// The first write of this name fails as a store that is unavailable for a moment does
    /// (nothing written); nothing dies, and every other write goes through.
    Blip(&'static str),
}

/// One attempt's crash plan and write counter, shared by everything the attempt touches.
#[derive(Debug, Default)]
pub struct Crash {
    plan: Mutex<Option<CrashAt>>,
    writes: AtomicU64,
    dead: AtomicBool,
    /// A [`CrashAt::Blip`] came.
    blipped: AtomicBool,
    /// The writes that happened, by name, in order (what a crash point is named after).
    log: Mutex<Vec<&'static str>>,
}

impl Crash {
    /// No crash: count the writes of an uninterrupted run.
    pub fn never() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn at(plan: CrashAt) -> Arc<Self> {
        let crash = Self::default();
        *crash.plan.lock().unwrap() = Some(plan);
        Arc::new(crash)
    }

    /// Writes done (or attempted, for the one that crashed before).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// The names of the writes, in order.
    pub fn log(&self) -> Vec<&'static str> {
        self.log.lock().unwrap().clone()
    }

    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    fn died() -> StoreError {
        StoreError::Unavailable("the worker crashed here (fault injection)".into())
    }

    /// Fail once dead.
    pub fn alive(&self) -> Result<(), StoreError> {
        if self.is_dead() {
            return Err(Self::died());
        }
        Ok(())
    }

    /// Run `write` as the next write point named `what`, crashing before or after it as
    /// planned.
    pub async fn write<T, E: From<StoreError>>(
        &self,
        what: &'static str,
        write: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.alive()?;
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        self.log.lock().unwrap().push(what);
        let plan = *self.plan.lock().unwrap();
        if plan == Some(CrashAt::Blip(what)) && !self.blipped.swap(true, Ordering::SeqCst) {
            return Err(
                StoreError::Unavailable("a moment's outage (fault injection)".into()).into(),
            );
        }
        if plan == Some(CrashAt::Before(n)) {
            self.dead.store(true, Ordering::SeqCst);
            return Err(Self::died().into());
        }
        let done = write.await;
        if plan == Some(CrashAt::After(n)) || plan == Some(CrashAt::AfterFirst(what)) {
            self.dead.store(true, Ordering::SeqCst);
            return Err(Self::died().into());
        }
        done
    }
}

/// A real store behind a [`Crash`].
pub struct CrashStore {
    pub inner: Arc<dyn Store>,
    pub crash: Arc<Crash>,
    /// Whether the turn's combined writes are offered, as the inner store offers them (each
    /// one write point, all or nothing): what the worker uses on SQLite and DynamoDB. Without
    /// them the turn's writes are made one by one, as after a refused combined write.
    pub combined: bool,
}

impl std::fmt::Debug for CrashStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrashStore")
            .field("crash", &self.crash)
            .finish_non_exhaustive()
    }
}

impl CrashStore {
    /// The turn's writes one by one.
    pub fn new(inner: Arc<dyn Store>, crash: Arc<Crash>) -> Self {
        Self {
            inner,
            crash,
            combined: false,
        }
    }

    /// The turn's writes combined where the inner store combines them.
    pub fn combining(inner: Arc<dyn Store>, crash: Arc<Crash>) -> Self {
        Self {
            combined: true,
            ..Self::new(inner, crash)
        }
    }

    fn combined(&self) -> Result<&dyn TurnWrites, StoreError> {
        self.inner
            .turn_writes()
            .ok_or_else(|| StoreError::Unavailable("the inner store combines nothing".into()))
    }

    fn alive(&self) -> Result<(), StoreError> {
        self.crash.alive()
    }

    async fn write<T, E: From<StoreError>>(
        &self,
        what: &'static str,
        write: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.crash.write(what, write).await
    }
}

#[async_trait]
impl MessageStore for CrashStore {
    async fn append_message(&self, message: &Message) -> Result<(), StoreError> {
        self.write("append_message", self.inner.append_message(message))
            .await
    }
    async fn start_turn(
        &self,
        conversation: &Conversation,
        message: &Message,
        entry: &VisibleEntry,
    ) -> Result<(), StoreError> {
        self.write(
            "start_turn",
            self.inner.start_turn(conversation, message, entry),
        )
        .await
    }
    async fn messages(&self, c: &ConversationId, segment: u32) -> Result<Vec<Message>, StoreError> {
        self.alive()?;
        self.inner.messages(c, segment).await
    }
    async fn next_position(&self, c: &ConversationId) -> Result<u64, StoreError> {
        self.alive()?;
        self.inner.next_position(c).await
    }
}

#[async_trait]
impl ConversationStore for CrashStore {
    async fn create_conversation(&self, c: &Conversation) -> Result<(), StoreError> {
        self.write("create_conversation", self.inner.create_conversation(c))
            .await
    }
    async fn conversation(&self, id: &ConversationId) -> Result<Option<Conversation>, StoreError> {
        self.alive()?;
        self.inner.conversation(id).await
    }
    async fn update_conversation(&self, c: &Conversation) -> Result<(), StoreError> {
        self.write("update_conversation", self.inner.update_conversation(c))
            .await
    }
    async fn conversations_of(&self, user: &UserId) -> Result<Vec<Conversation>, StoreError> {
        self.alive()?;
        self.inner.conversations_of(user).await
    }
}

#[async_trait]
impl VisibleStore for CrashStore {
    async fn append_visible(&self, e: &VisibleEntry) -> Result<(), StoreError> {
        self.write("append_visible", self.inner.append_visible(e))
            .await
    }
    async fn visible(&self, c: &ConversationId) -> Result<Vec<VisibleEntry>, StoreError> {
        self.alive()?;
        self.inner.visible(c).await
    }
    async fn next_visible_position(&self, c: &ConversationId) -> Result<u64, StoreError> {
        self.alive()?;
        self.inner.next_visible_position(c).await
    }
    fn turn_writes(&self) -> Option<&dyn TurnWrites> {
        (self.combined && self.inner.turn_writes().is_some()).then_some(self as &dyn TurnWrites)
    }
}

/// Each combined write is one write point.
#[async_trait]
impl TurnWrites for CrashStore {
    async fn claim_with_lease(
        &self,
        start: &ClaimWithLease<'_>,
    ) -> Result<ClaimedWithLease, StoreError> {
        let inner = self.combined()?;
        self.write("claim_with_lease", inner.claim_with_lease(start))
            .await
    }
    /// The worker's path: on SQLite the start's read is made inside the claim's write, which is
    /// still one write point (a crash before it leaves nothing, after it the claim and lease).
    async fn claim_with_lease_reading(
        &self,
        start: &ClaimWithLease<'_>,
        user: &UserId,
    ) -> Result<(ClaimedWithLease, Option<StartRead>), StoreError> {
        let inner = self.combined()?;
        self.write(
            "claim_with_lease",
            inner.claim_with_lease_reading(start, user),
        )
        .await
    }
    async fn finish_turn(&self, finish: &TurnFinish<'_>) -> Result<(), StoreError> {
        let inner = self.combined()?;
        self.write("finish_turn", inner.finish_turn(finish)).await
    }
    async fn start_turn_reserving(
        &self,
        conversation: &Conversation,
        message: &Message,
        entry: &VisibleEntry,
        reserve: &[Charge],
    ) -> Result<bool, StoreError> {
        let inner = self.combined()?;
        self.write(
            "start_turn_reserving",
            inner.start_turn_reserving(conversation, message, entry, reserve),
        )
        .await
    }
    async fn append_with_tool_result(
        &self,
        message: &Message,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
        reserve: &[Charge],
    ) -> Result<bool, StoreError> {
        let inner = self.combined()?;
        self.write(
            "append_with_tool_result",
            inner.append_with_tool_result(message, asked_at, tool_use_id, result, reserve),
        )
        .await
    }
    async fn append_message_adjusting(
        &self,
        message: &Message,
        adjustments: &[Adjustment],
    ) -> Result<(), StoreError> {
        let inner = self.combined()?;
        self.write(
            "append_message_adjusting",
            inner.append_message_adjusting(message, adjustments),
        )
        .await
    }
    async fn conversation_and_account(
        &self,
        id: &ConversationId,
        user: &UserId,
    ) -> Result<StartRead, StoreError> {
        self.alive()?;
        self.combined()?.conversation_and_account(id, user).await
    }
}

#[async_trait]
impl JobClaims for CrashStore {
    async fn claim_job(&self, key: &str, now: i64, until: i64) -> Result<Claim, StoreError> {
        self.write("claim_job", self.inner.claim_job(key, now, until))
            .await
    }
    async fn finish_job(&self, key: &str, keep_until: i64) -> Result<(), StoreError> {
        self.write("finish_job", self.inner.finish_job(key, keep_until))
            .await
    }
    async fn release_job(
        &self,
        key: &str,
        attempt: u32,
        now: i64,
        sent: Option<&store::ReplySent>,
    ) -> Result<(), StoreError> {
        self.write(
            "release_job",
            self.inner.release_job(key, attempt, now, sent),
        )
        .await
    }
    async fn reply_sent(&self, key: &str) -> Result<Option<store::ReplySent>, StoreError> {
        self.alive()?;
        self.inner.reply_sent(key).await
    }
}

#[async_trait]
impl store::Retention for CrashStore {
    async fn expire_conversation(
        &self,
        conversation: &ConversationId,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.write(
            "expire_conversation",
            self.inner
                .expire_conversation(conversation, until_ms, now_ms),
        )
        .await
    }
    async fn sweep_expired(&self, now_ms: i64) -> Result<u64, StoreError> {
        self.write("sweep_expired", self.inner.sweep_expired(now_ms))
            .await
    }
}

#[async_trait]
impl store::Leases for CrashStore {
    async fn acquire_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
        now: i64,
        until: i64,
    ) -> Result<store::Lease, StoreError> {
        self.write(
            "acquire_lease",
            self.inner.acquire_lease(conversation, holder, now, until),
        )
        .await
    }
    async fn release_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
    ) -> Result<(), StoreError> {
        self.write(
            "release_lease",
            self.inner.release_lease(conversation, holder),
        )
        .await
    }
}

#[async_trait]
impl store::ToolResults for CrashStore {
    async fn put_tool_result(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
        tool_use_id: &str,
        result: &transcript::Part,
    ) -> Result<(), StoreError> {
        self.write(
            "put_tool_result",
            self.inner
                .put_tool_result(conversation, asked_at, tool_use_id, result),
        )
        .await
    }
    async fn tool_results(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
    ) -> Result<std::collections::HashMap<String, transcript::Part>, StoreError> {
        self.alive()?;
        self.inner.tool_results(conversation, asked_at).await
    }
    async fn receipt(&self, call_key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.alive()?;
        self.inner.receipt(call_key).await
    }
}

#[async_trait]
impl store::Sessions for CrashStore {
    async fn put_session(&self, session: &store::Session) -> Result<(), StoreError> {
        self.write("put_session", self.inner.put_session(session))
            .await
    }
    async fn session(&self, id_hash: &str, now: i64) -> Result<Option<store::Session>, StoreError> {
        self.alive()?;
        self.inner.session(id_hash, now).await
    }
    async fn delete_session(&self, id_hash: &str) -> Result<(), StoreError> {
        self.write("delete_session", self.inner.delete_session(id_hash))
            .await
    }
    async fn first_use_of_login(
        &self,
        state: &str,
        now_ms: i64,
        keep_until_ms: i64,
    ) -> Result<bool, StoreError> {
        self.write(
            "first_use_of_login",
            self.inner.first_use_of_login(state, now_ms, keep_until_ms),
        )
        .await
    }
}

#[async_trait]
impl Identities for CrashStore {
    async fn create_link_code(
        &self,
        code: &str,
        user: &UserId,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.write(
            "create_link_code",
            self.inner.create_link_code(code, user, now, expires_at),
        )
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
        self.write(
            "create_link_code",
            self.inner
                .create_link_code_for(code, user, redeemer, now, expires_at),
        )
        .await
    }
    async fn link_code_redeemed_at(&self, code: &str) -> Result<Option<i64>, StoreError> {
        self.alive()?;
        self.inner.link_code_redeemed_at(code).await
    }
    async fn link_code_expires_at(&self, code: &str) -> Result<Option<i64>, StoreError> {
        self.alive()?;
        self.inner.link_code_expires_at(code).await
    }
    async fn consume_link_code(
        &self,
        code: &str,
        redeemer: &str,
        now: i64,
    ) -> Result<Option<UserId>, StoreError> {
        self.write(
            "consume_link_code",
            self.inner.consume_link_code(code, redeemer, now),
        )
        .await
    }
    async fn bind_identity(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
        now: i64,
    ) -> Result<(), StoreError> {
        self.write(
            "bind_identity",
            self.inner.bind_identity(channel, external_id, user, now),
        )
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
        self.write(
            "bind_identity_if",
            self.inner
                .bind_identity_if(channel, external_id, user, was, now),
        )
        .await
    }
    async fn identity(
        &self,
        channel: &str,
        external_id: &str,
    ) -> Result<Option<UserId>, StoreError> {
        self.alive()?;
        self.inner.identity(channel, external_id).await
    }
    async fn bindings(&self, user: Option<&UserId>) -> Result<Vec<store::Binding>, StoreError> {
        self.alive()?;
        self.inner.bindings(user).await
    }
    async fn unbind_identity_if(
        &self,
        channel: &str,
        external_id: &str,
        bound_by_ms: i64,
    ) -> Result<Option<UserId>, StoreError> {
        self.write(
            "unbind_identity_if",
            self.inner
                .unbind_identity_if(channel, external_id, bound_by_ms),
        )
        .await
    }

    async fn unbind_identity_of(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
    ) -> Result<bool, StoreError> {
        self.write(
            "unbind_identity_of",
            self.inner.unbind_identity_of(channel, external_id, user),
        )
        .await
    }
}

#[async_trait]
impl store::Records for CrashStore {
    async fn record(&self, kind: &str, id: &str) -> Result<Option<store::Record>, StoreError> {
        self.alive()?;
        self.inner.record(kind, id).await
    }
    async fn records_of(
        &self,
        owner: &UserId,
        kind: &str,
    ) -> Result<Vec<store::Record>, StoreError> {
        self.alive()?;
        self.inner.records_of(owner, kind).await
    }
    async fn commit(&self, commit: &store::ActionCommit) -> Result<(), StoreError> {
        self.write("commit", self.inner.commit(commit)).await
    }
    async fn undo_last(&self, undo: &store::UndoRequest) -> Result<store::UndoOutcome, StoreError> {
        self.write("undo_last", self.inner.undo_last(undo)).await
    }
    async fn next_undo(
        &self,
        user: &UserId,
        scope: &store::UndoScope,
    ) -> Result<Vec<store::AuditEntry>, StoreError> {
        self.alive()?;
        self.inner.next_undo(user, scope).await
    }
    async fn audit_log(&self, user: &UserId) -> Result<Vec<store::AuditEntry>, StoreError> {
        self.alive()?;
        self.inner.audit_log(user).await
    }
}

#[async_trait]
impl store::Confirmations for CrashStore {
    async fn put_pending(&self, pending: &store::Pending) -> Result<(), StoreError> {
        self.write("put_pending", self.inner.put_pending(pending))
            .await
    }
    async fn take_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        current_action: &str,
        now_ms: i64,
    ) -> Result<Option<store::Pending>, StoreError> {
        self.write(
            "take_pending",
            self.inner
                .take_pending(conversation, hash, current_action, now_ms),
        )
        .await
    }
    async fn read_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        now_ms: i64,
    ) -> Result<Option<store::Pending>, StoreError> {
        self.alive()?;
        self.inner.read_pending(conversation, hash, now_ms).await
    }
}

#[async_trait]
impl store::Accounts for CrashStore {
    async fn account(&self, user: &UserId) -> Result<Option<store::Account>, StoreError> {
        self.alive()?;
        self.inner.account(user).await
    }
    async fn account_by_email(
        &self,
        email: &store::Email,
    ) -> Result<Option<store::Account>, StoreError> {
        self.alive()?;
        self.inner.account_by_email(email).await
    }
    async fn accounts_page(
        &self,
        after: Option<&store::AccountCursor>,
        limit: usize,
    ) -> Result<store::AccountPage, StoreError> {
        self.alive()?;
        self.inner.accounts_page(after, limit).await
    }
    async fn create_account(
        &self,
        account: &store::Account,
    ) -> Result<(), store::CreateAccountError> {
        self.write("create_account", self.inner.create_account(account))
            .await
    }
    async fn put_account(&self, account: &store::Account) -> Result<(), StoreError> {
        self.write("put_account", self.inner.put_account(account))
            .await
    }
    async fn set_account_status(
        &self,
        user: &UserId,
        status: store::AccountStatus,
    ) -> Result<(), StoreError> {
        self.write(
            "set_account_status",
            self.inner.set_account_status(user, status),
        )
        .await
    }
}

#[async_trait]
impl store::ActiveRecords for CrashStore {
    async fn set_active(
        &self,
        conversation: &ConversationId,
        kind: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        self.write("set_active", self.inner.set_active(conversation, kind, id))
            .await
    }
    async fn active(
        &self,
        conversation: &ConversationId,
        kind: &str,
    ) -> Result<Option<String>, StoreError> {
        self.alive()?;
        self.inner.active(conversation, kind).await
    }
    async fn records_with_active(
        &self,
        owner: &UserId,
        kind: &str,
        conversation: &ConversationId,
    ) -> Result<(Vec<store::Record>, Option<String>), StoreError> {
        self.alive()?;
        self.inner
            .records_with_active(owner, kind, conversation)
            .await
    }
}

#[async_trait]
impl store::BudgetLedger for CrashStore {
    async fn reserve(&self, charges: &[store::Charge]) -> Result<store::Reserve, StoreError> {
        self.write("reserve", self.inner.reserve(charges)).await
    }
    async fn adjust(&self, adjustments: &[store::Adjustment]) -> Result<(), StoreError> {
        self.write("adjust", self.inner.adjust(adjustments)).await
    }
    async fn bucket_usage(&self, buckets: &[store::BucketKey]) -> Result<Vec<u64>, StoreError> {
        self.alive()?;
        self.inner.bucket_usage(buckets).await
    }
    async fn buckets_of_window(
        &self,
        window: &str,
        start_ms: i64,
    ) -> Result<Vec<store::BucketUsage>, StoreError> {
        self.alive()?;
        self.inner.buckets_of_window(window, start_ms).await
    }
}

/// The user's end of a channel under a [`Crash`]: records what was delivered, unless the
/// worker died first. Delivering is a write point of the attempt (`deliver the reply`), so a
/// crash can come just before or just after the platform took a reply.
#[derive(Debug)]
pub struct RecordingSender {
    pub crash: Arc<Crash>,
    pub delivered: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl channels::Sender for RecordingSender {
    fn max_chars(&self) -> usize {
        usize::MAX
    }

    fn has_reactions(&self) -> bool {
        false
    }

    async fn send_from(
        &self,
        reply: &channels::Outgoing,
        sent: &mut channels::Delivered,
    ) -> Result<(), channels::SendError> {
        let delivered = self.delivered.clone();
        let text = reply.text.clone();
        let piece = self
            .crash
            .write("deliver the reply", async move {
                delivered.lock().unwrap().push(text.clone());
                Ok::<_, StoreError>(text)
            })
            .await
            .map_err(|_| channels::SendError::Retryable { status: 503 })?;
        sent.pieces.push(piece);
        Ok(())
    }
}
