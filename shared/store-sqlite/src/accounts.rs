//! `Accounts` (one row per user in `accounts`) and `ActiveRecords` (one row per conversation
//! and record kind in `active_records`); both are plain upserts and lookups.

use crate::SqliteStore;
use crate::error::{corrupt, unavailable};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use store::{Account, AccountStatus, Accounts, ActiveRecords, StoreError};
use transcript::{ConversationId, UserId};

#[async_trait]
impl Accounts for SqliteStore {
    async fn account(&self, user: &UserId) -> Result<Option<Account>, StoreError> {
        let row: Option<(String, String, String)> = self
            .conn()
            .prepare_cached(
                "SELECT status, display_name, time_zone FROM accounts WHERE user_id = ?1",
            )
            .map_err(unavailable)?
            .query_row(params![user.0], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()
            .map_err(unavailable)?;
        row.map(|(status, display_name, time_zone)| {
            Ok(Account {
                user: user.clone(),
                status: AccountStatus::parse(&status).ok_or_else(|| {
                    corrupt(
                        format!("account {user}"),
                        format!("unknown status {status:?}"),
                    )
                })?,
                display_name,
                time_zone,
            })
        })
        .transpose()
    }

    async fn put_account(&self, account: &Account) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "INSERT INTO accounts (user_id, status, display_name, time_zone)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (user_id) DO UPDATE SET
                     status = excluded.status,
                     display_name = excluded.display_name,
                     time_zone = excluded.time_zone",
            )
            .map_err(unavailable)?
            .execute(params![
                account.user.0,
                account.status.as_str(),
                account.display_name,
                account.time_zone
            ])
            .map_err(unavailable)?;
        Ok(())
    }
}

#[async_trait]
impl ActiveRecords for SqliteStore {
    async fn set_active(
        &self,
        conversation: &ConversationId,
        kind: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "INSERT INTO active_records (conversation_id, kind, id) VALUES (?1, ?2, ?3)
                 ON CONFLICT (conversation_id, kind) DO UPDATE SET id = excluded.id",
            )
            .map_err(unavailable)?
            .execute(params![conversation.0, kind, id])
            .map_err(unavailable)?;
        Ok(())
    }

    async fn active(
        &self,
        conversation: &ConversationId,
        kind: &str,
    ) -> Result<Option<String>, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT id FROM active_records WHERE conversation_id = ?1 AND kind = ?2",
            )
            .map_err(unavailable)?
            .query_row(params![conversation.0, kind], |r| r.get(0))
            .optional()
            .map_err(unavailable)
    }
}
