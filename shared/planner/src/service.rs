//! The service core: who is calling, the ownership gate, and the one transaction helper every
//! mutation goes through.

use crate::PlannerError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use store::{Account, AccountStatus, ActionCommit, ActorKind, Change, Receipt, Store};
use tools::{Actor, Ctx};
use transcript::{ConversationId, UserId};

/// Unix milliseconds now; injectable for tests.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Who is acting, from authentication (never from model output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user: UserId,
    pub actor: ActorKind,
    /// The request's action id: audit rows carry it, undo reverts by it.
    pub action_id: String,
    pub conversation: Option<ConversationId>,
    /// While a model's tool call runs: its key ([`Ctx::call_key`]). A write made with it commits
    /// the call's receipt with its effect, so a resumed turn never runs the call again.
    pub call_key: Option<String>,
    /// What the caller may do ([`Ctx::grant`]: an MCP token's scope, the assistant's grant at
    /// its turn's start; the widest for the person acting directly). A write checks it
    /// ([`Planner::check_may_write`]), whoever calls, whatever the tool's read-only flag said.
    pub grant: tools::Grant,
}

impl Caller {
    /// The caller a tool call runs as.
    pub fn from_ctx(ctx: &Ctx) -> Self {
        Self {
            user: ctx.user_id.clone(),
            actor: match ctx.actor {
                Actor::User => ActorKind::User,
                Actor::Agent => ActorKind::Agent,
                Actor::Mcp => ActorKind::Mcp,
            },
            action_id: ctx.action_id.0.clone(),
            conversation: Some(ctx.conversation_id.clone()),
            call_key: ctx.call_key.clone(),
            grant: ctx.grant,
        }
    }
}

/// How a write is allowed: as the owner of the records, or as a public party acting on an
/// owner's records through a public entry point (audited under the owner, not undoable by them).
pub(crate) enum Access<'a> {
    Owner(&'a Caller),
    Public {
        owner: &'a UserId,
        action_id: &'a str,
    },
}

/// The planner's service layer. Cheap to share behind an `Arc`.
pub struct Planner {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Clock,
}

impl std::fmt::Debug for Planner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planner").finish_non_exhaustive()
    }
}

impl Planner {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            clock: Arc::new(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }),
        }
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The gate: the record `(kind, id)` and its stored value, only if `user` owns it. Absent
    /// and someone else's are the same [`PlannerError::NotFound`].
    pub async fn owned<T: DeserializeOwned>(
        &self,
        user: &UserId,
        kind: &'static str,
        id: &str,
    ) -> Result<(T, Value), PlannerError> {
        let not_found = || PlannerError::NotFound {
            kind,
            id: id.to_owned(),
        };
        let record = self.store.record(kind, id).await?.ok_or_else(not_found)?;
        if &record.owner != user {
            return Err(not_found());
        }
        let typed = serde_json::from_value(record.value.clone()).map_err(|e| {
            PlannerError::Store(store::StoreError::Corrupt {
                what: format!("{kind}/{id}"),
                source: Box::new(e),
            })
        })?;
        Ok((typed, record.value))
    }

    /// The account may act: it exists and is active.
    pub(crate) async fn check_active(&self, user: &UserId) -> Result<(), PlannerError> {
        self.active_account(user).await.map(drop)
    }

    /// `caller` may change things now: its own grant allows writes (an MCP token's scope, the
    /// assistant's at its turn's start: the second check behind the registry's, which goes by
    /// the tool's read-only flag), the account is active and, for the assistant, its grant as
    /// stored now allows writes. One read of the account, right before the write, so a grant
    /// narrowed during a turn (whose tools got the grant of its start) bites on the next call.
    pub(crate) async fn check_may_write(&self, caller: &Caller) -> Result<(), PlannerError> {
        if !caller.grant.allows_writes() {
            tracing::info!(action_id = %caller.action_id, grant = %caller.grant, actor = ?caller.actor, "a write outside the caller's grant refused");
            return Err(PlannerError::NotAllowed(caller.grant));
        }
        let account = self.active_account(&caller.user).await?;
        let grant = account.assistant_grant;
        if caller.actor == ActorKind::Agent && !grant.allows_writes() {
            tracing::info!(action_id = %caller.action_id, %grant, "a write outside the assistant's grant refused");
            return Err(PlannerError::NotAllowed(grant));
        }
        Ok(())
    }

    async fn active_account(&self, user: &UserId) -> Result<Account, PlannerError> {
        match self.store.account(user).await? {
            Some(a) if a.status == AccountStatus::Active => Ok(a),
            Some(a) => Err(PlannerError::AccountInactive(a.status.as_str().to_owned())),
            None => Err(PlannerError::AccountInactive("no account".into())),
        }
    }

    /// The one transaction helper: check access (the caller's own grant; the account active;
    /// the assistant's grant as stored now: [`Planner::check_may_write`]), then write `changes` and
    /// the audit row
    /// atomically. Every change must be of a record owned by the acting account. `answer` is
    /// what the service returns for the write; in a model's tool call it is committed as the
    /// call's receipt (the tool's output is its JSON), with the effect.
    pub(crate) async fn write<T: Serialize>(
        &self,
        access: Access<'_>,
        changes: Vec<Change>,
        answer: &T,
    ) -> Result<(), PlannerError> {
        let receipt = match &access {
            Access::Owner(Caller {
                call_key: Some(key),
                ..
            }) => Some(Receipt {
                call_key: key.clone(),
                output: serde_json::to_value(answer).unwrap_or(Value::Null),
            }),
            _ => None,
        };
        let (user, actor, action_id, by_user, conversation) = match access {
            Access::Owner(caller) => {
                self.check_may_write(caller).await?;
                (
                    &caller.user,
                    caller.actor,
                    caller.action_id.as_str(),
                    true,
                    caller.conversation.clone(),
                )
            }
            Access::Public { owner, action_id } => {
                self.check_active(owner).await?;
                (owner, ActorKind::Public, action_id, false, None)
            }
        };
        if let Some(foreign) = changes.iter().find(|c| &c.owner != user) {
            // A service bug, never a user error: refuse rather than touch another tenant.
            tracing::error!(kind = %foreign.kind, id = %foreign.id, "a write touched a record of another owner");
            return Err(PlannerError::NotFound {
                kind: if foreign.kind == crate::EVENT {
                    crate::EVENT
                } else {
                    crate::ATTENDEE
                },
                id: foreign.id.clone(),
            });
        }
        if let Some(why) = changes.iter().find_map(too_big) {
            return Err(PlannerError::Rule(why));
        }
        let commit = ActionCommit {
            action_id: action_id.to_owned(),
            actor,
            user: user.clone(),
            by_user,
            at_ms: (self.clock)(),
            changes,
            receipt,
            conversation,
        };
        Ok(self.store.commit(&commit).await?)
    }

    pub(crate) fn now(&self) -> i64 {
        (self.clock)()
    }
}

/// Why `c` may not be written, when it would make its record bigger than the store keeps
/// ([`store::MAX_RECORD_BYTES`]; the store refuses it too, in words for the model here).
fn too_big(c: &Change) -> Option<String> {
    let bytes = store::canonical_json(c.after.as_ref()?).len();
    (bytes > store::MAX_RECORD_BYTES).then(|| {
        format!(
            "That would make this {} {} KB, and one holds at most {} KB, so nothing was changed. \
             Make room first: fewer or shorter entries (for a program, shorter titles, speaker \
             lists or session ids).",
            c.kind,
            bytes.div_ceil(1_000),
            store::MAX_RECORD_BYTES / 1_000
        )
    })
}

/// A change from `before` (as stored) to `after`.
pub(crate) fn change<T: Serialize>(
    kind: &str,
    id: &str,
    owner: &UserId,
    before: Option<Value>,
    after: Option<&T>,
) -> Change {
    Change {
        kind: kind.to_owned(),
        id: id.to_owned(),
        owner: owner.clone(),
        before,
        after: after.map(|a| serde_json::to_value(a).unwrap_or(Value::Null)),
    }
}

/// A fresh id with a readable prefix, e.g. `ev-1a2b3c4d`.
pub(crate) fn new_id(prefix: &str) -> String {
    let uuid = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &uuid[..10])
}
