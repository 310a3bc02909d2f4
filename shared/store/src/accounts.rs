use crate::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use transcript::UserId;

/// Whether an account may act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountStatus {
    Active,
    /// Temporarily stopped (e.g. by an operator or a guard): answered without work.
    Paused,
    Closed,
}

impl AccountStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AccountStatus::Active => "active",
            AccountStatus::Paused => "paused",
            AccountStatus::Closed => "closed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "active" => AccountStatus::Active,
            "paused" => AccountStatus::Paused,
            "closed" => AccountStatus::Closed,
            _ => return None,
        })
    }
}

/// A user of the product.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    pub user: UserId,
    pub status: AccountStatus,
    pub display_name: String,
    /// IANA time zone name, e.g. `Europe/Madrid`.
    pub time_zone: String,
}

/// Users and their status.
#[async_trait]
pub trait Accounts: Send + Sync {
    async fn account(&self, user: &UserId) -> Result<Option<Account>, StoreError>;

    /// Create or replace the account.
    async fn put_account(&self, account: &Account) -> Result<(), StoreError>;
}
