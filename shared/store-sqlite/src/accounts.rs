//! `Accounts` (one row per user in `accounts`; the unique index `accounts_by_email` keeps
//! e-mails unique, so a taken one fails the insert itself, with no read-then-write race) and
//! `ActiveRecords` (one row per conversation and record kind in `active_records`, plain
//! upserts and lookups).

use crate::SqliteStore;
use crate::error::{corrupt, to_sql, unavailable};
use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{OptionalExtension, ffi, params, params_from_iter};
use store::{
    Account, AccountCursor, AccountPage, AccountStatus, Accounts, ActiveRecords,
    CreateAccountError, Email, Record, Roles, StoreError,
};
use transcript::{ConversationId, Grant, UserId};

/// The columns [`account_row`] reads, in its order.
const ACCOUNT_COLUMNS: &str = "user_id, status, display_name, time_zone, email, roles, \
     created_at_ms, assistant_grant, sessions_ended_at_ms";

/// `user`'s account, if there is one.
pub(crate) fn read(
    conn: &rusqlite::Connection,
    user: &UserId,
) -> Result<Option<Account>, StoreError> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE user_id = ?1"
        ))
        .map_err(unavailable)?
        .query_row(params![user.0], raw_account)
        .optional()
        .map_err(unavailable)?;
    row.map(account_row).transpose()
}

#[async_trait]
impl Accounts for SqliteStore {
    async fn account(&self, user: &UserId) -> Result<Option<Account>, StoreError> {
        let user = user.clone();
        self.db.read(move |conn| read(conn, &user)).await
    }

    async fn account_by_email(&self, email: &Email) -> Result<Option<Account>, StoreError> {
        let email = email.clone();
        self.db
            .read(move |conn| {
                let row = conn
                    .prepare_cached(&format!(
                        "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE email = ?1"
                    ))
                    .map_err(unavailable)?
                    .query_row(params![email.as_str()], raw_account)
                    .optional()
                    .map_err(unavailable)?;
                row.map(account_row).transpose()
            })
            .await
    }

    async fn accounts_page(
        &self,
        after: Option<&AccountCursor>,
        limit: usize,
    ) -> Result<AccountPage, StoreError> {
        let after = after.cloned();
        self.db
            .read(move |conn| {
                // One more than asked: whether it exists says whether there is a next page.
                let fetch = to_sql(limit as u64, "page size")?.saturating_add(1);
                let rows = {
                    let mut statement = conn
                        .prepare_cached(&format!(
                            "SELECT {ACCOUNT_COLUMNS} FROM accounts
                     WHERE ?1 IS NULL OR (created_at_ms, user_id) > (?1, ?2)
                     ORDER BY created_at_ms, user_id
                     LIMIT ?3"
                        ))
                        .map_err(unavailable)?;
                    statement
                        .query_map(
                            params![
                                after.as_ref().map(|c| c.created_at_ms),
                                after.as_ref().map(|c| c.user.0.as_str()),
                                fetch
                            ],
                            raw_account,
                        )
                        .map_err(unavailable)?
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(unavailable)?
                };
                let mut accounts = rows
                    .into_iter()
                    .map(account_row)
                    .collect::<Result<Vec<_>, _>>()?;
                let more = accounts.len() > limit;
                accounts.truncate(limit);
                let next = more.then(|| accounts.last().map(Account::cursor)).flatten();
                Ok(AccountPage { accounts, next })
            })
            .await
    }

    async fn create_account(&self, account: &Account) -> Result<(), CreateAccountError> {
        let account = account.clone();
        // The insert's refusal is an answer, not a failed write: the inner result.
        self.db
            .write(move |conn| {
                let inserted = conn
                    .prepare_cached(&format!(
                        "INSERT INTO accounts ({ACCOUNT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                    ))
                    .map_err(unavailable)?
                    .execute(params_from_iter(account_params(&account)));
                Ok(refusal(inserted, &account))
            })
            .await?
    }

    async fn put_account(&self, account: &Account) -> Result<(), StoreError> {
        let account = account.clone();
        self.db
            .write(move |conn| {
                conn.prepare_cached(&format!(
                "INSERT INTO accounts ({ACCOUNT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (user_id) DO UPDATE SET
                     status = excluded.status,
                     display_name = excluded.display_name,
                     time_zone = excluded.time_zone,
                     email = excluded.email,
                     roles = excluded.roles,
                     created_at_ms = excluded.created_at_ms,
                     assistant_grant = excluded.assistant_grant,
                     sessions_ended_at_ms =
                         MAX(accounts.sessions_ended_at_ms, excluded.sessions_ended_at_ms)"
            ))
                .map_err(unavailable)?
                .execute(params_from_iter(account_params(&account)))
                .map_err(|err| match err.sqlite_error().map(|e| e.extended_code) {
                    // The e-mail index: the user-id clash is the upsert's.
                    Some(ffi::SQLITE_CONSTRAINT_UNIQUE) => StoreError::Conflict {
                        what: format!(
                            "e-mail {}",
                            account.email.as_ref().map_or("", Email::as_str)
                        ),
                    },
                    _ => unavailable(err),
                })?;
                Ok(())
            })
            .await
    }

    async fn set_account_status(
        &self,
        user: &UserId,
        status: AccountStatus,
    ) -> Result<(), StoreError> {
        let sql = "UPDATE accounts SET status = ?2 WHERE user_id = ?1";
        self.update_account(user, sql, Value::Text(status.as_str().to_owned()))
            .await
    }

    async fn set_assistant_grant(&self, user: &UserId, grant: Grant) -> Result<(), StoreError> {
        let sql = "UPDATE accounts SET assistant_grant = ?2 WHERE user_id = ?1";
        self.update_account(user, sql, Value::Text(grant.as_str().to_owned()))
            .await
    }

    async fn end_sessions(&self, user: &UserId, at_ms: i64) -> Result<(), StoreError> {
        let sql = "UPDATE accounts SET sessions_ended_at_ms = MAX(sessions_ended_at_ms, ?2)
                   WHERE user_id = ?1";
        self.update_account(user, sql, Value::Integer(at_ms)).await
    }
}

impl SqliteStore {
    /// Run `sql` (`?1` the user id, `?2` `value`) on `user`'s account: one field of it set;
    /// [`StoreError::NotFound`] when there is no such account.
    async fn update_account(
        &self,
        user: &UserId,
        sql: &'static str,
        value: Value,
    ) -> Result<(), StoreError> {
        let user = user.clone();
        self.db
            .write(move |conn| {
                let changed = conn
                    .prepare_cached(sql)
                    .map_err(unavailable)?
                    .execute(params![user.0, value])
                    .map_err(unavailable)?;
                if changed == 0 {
                    return Err(StoreError::NotFound {
                        what: format!("account {user}"),
                    });
                }
                Ok(())
            })
            .await
    }
}

type RawAccount = (
    String,
    String,
    String,
    String,
    Option<String>,
    String,
    i64,
    Option<String>,
    i64,
);

fn raw_account(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawAccount> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
}

fn account_row(
    (
        user,
        status,
        display_name,
        time_zone,
        email,
        roles,
        created_at_ms,
        grant,
        sessions_ended_at_ms,
    ): RawAccount,
) -> Result<Account, StoreError> {
    let what = || format!("account {user}");
    Ok(Account {
        status: AccountStatus::parse(&status)
            .ok_or_else(|| corrupt(what(), format!("unknown status {status:?}")))?,
        email: email
            .map(|e| Email::parse(&e))
            .transpose()
            .map_err(|e| corrupt(what(), e))?,
        roles: Roles::parse(&roles)
            .ok_or_else(|| corrupt(what(), format!("unknown roles {roles:?}")))?,
        assistant_grant: match grant {
            None => Grant::default(),
            Some(g) => Grant::parse(&g)
                .ok_or_else(|| corrupt(what(), format!("unknown assistant grant {g:?}")))?,
        },
        user: UserId(user),
        display_name,
        time_zone,
        created_at_ms,
        sessions_ended_at_ms,
    })
}

fn account_params(account: &Account) -> [Box<dyn rusqlite::ToSql + '_>; 9] {
    [
        Box::new(account.user.0.as_str()),
        Box::new(account.status.as_str()),
        Box::new(account.display_name.as_str()),
        Box::new(account.time_zone.as_str()),
        Box::new(account.email.as_ref().map(Email::as_str)),
        Box::new(account.roles.to_string()),
        Box::new(account.created_at_ms),
        Box::new(account.assistant_grant.as_str()),
        Box::new(account.sessions_ended_at_ms),
    ]
}

#[async_trait]
impl ActiveRecords for SqliteStore {
    async fn set_active(
        &self,
        conversation: &ConversationId,
        kind: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        let conversation = conversation.clone();
        let kind = kind.to_owned();
        let id = id.to_owned();
        self.db
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO active_records (conversation_id, kind, id) VALUES (?1, ?2, ?3)
                 ON CONFLICT (conversation_id, kind) DO UPDATE SET id = excluded.id",
                )
                .map_err(unavailable)?
                .execute(params![conversation.0, kind, id])
                .map_err(unavailable)?;
                Ok(())
            })
            .await
    }

    async fn active(
        &self,
        conversation: &ConversationId,
        kind: &str,
    ) -> Result<Option<String>, StoreError> {
        let conversation = conversation.clone();
        let kind = kind.to_owned();
        self.db
            .read(move |conn| active(conn, &conversation, &kind))
            .await
    }

    async fn records_with_active(
        &self,
        owner: &UserId,
        kind: &str,
        conversation: &ConversationId,
    ) -> Result<(Vec<Record>, Option<String>), StoreError> {
        let (owner, kind, conversation) = (owner.clone(), kind.to_owned(), conversation.clone());
        self.db
            .read(move |conn| {
                Ok((
                    crate::records::records_of(conn, &owner, &kind)?,
                    active(conn, &conversation, &kind)?,
                ))
            })
            .await
    }
}

/// `conversation`'s active record of `kind`.
fn active(
    conn: &rusqlite::Connection,
    conversation: &ConversationId,
    kind: &str,
) -> Result<Option<String>, StoreError> {
    conn.prepare_cached("SELECT id FROM active_records WHERE conversation_id = ?1 AND kind = ?2")
        .map_err(unavailable)?
        .query_row(params![conversation.0, kind], |r| r.get(0))
        .optional()
        .map_err(unavailable)
}

/// An insert's outcome as `create_account` answers it.
fn refusal(inserted: rusqlite::Result<usize>, account: &Account) -> Result<(), CreateAccountError> {
    {
        match inserted {
            Ok(_) => Ok(()),
            Err(err) => Err(match err.sqlite_error().map(|e| e.extended_code) {
                Some(ffi::SQLITE_CONSTRAINT_PRIMARYKEY) => {
                    CreateAccountError::UserTaken(account.user.clone())
                }
                Some(ffi::SQLITE_CONSTRAINT_UNIQUE) => match &account.email {
                    Some(email) => CreateAccountError::EmailTaken(email.clone()),
                    None => unavailable(err).into(),
                },
                _ => unavailable(err).into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{MIGRATIONS, migrate};
    use rusqlite::Connection;

    /// Accounts stored before migration 7 read back with no e-mail, the `user` role and
    /// creation time 0, are listed, and can be given an e-mail.
    #[tokio::test]
    async fn accounts_from_before_emails_upgrade() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn, &MIGRATIONS[..6]).unwrap();
        for user in ["old-1", "old-2"] {
            conn.execute(
                "INSERT INTO accounts (user_id, status, display_name, time_zone)
                 VALUES (?1, 'paused', 'Old', 'Europe/Oslo')",
                params![user],
            )
            .unwrap();
        }
        migrate(&mut conn, MIGRATIONS).unwrap();
        let store = SqliteStore {
            db: crate::db::Db(std::sync::Arc::new(crate::Db::start(conn, Vec::new()))),
        };
        let old = Account {
            status: AccountStatus::Paused,
            time_zone: "Europe/Oslo".into(),
            ..Account::new("old-1", "Old")
        };
        assert_eq!(
            store.account(&"old-1".into()).await.unwrap(),
            Some(old.clone())
        );
        let listed: Vec<UserId> = store
            .all_accounts()
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.user)
            .collect();
        assert_eq!(listed, [UserId::from("old-1"), UserId::from("old-2")]);
        let with_email = Account {
            email: Some(Email::parse("old@example.org").unwrap()),
            ..old
        };
        store.put_account(&with_email).await.unwrap();
        assert_eq!(
            store
                .account_by_email(&Email::parse("OLD@example.org").unwrap())
                .await
                .unwrap(),
            Some(with_email)
        );
    }
}
