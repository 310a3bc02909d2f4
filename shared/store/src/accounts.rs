//! Users of the product: who they are (name, e-mail, time zone), whether they may act
//! (status), and what they may see (roles).

use crate::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt;
use transcript::{Grant, UserId};

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

/// An e-mail address, normalised: trimmed and lower-case, so one mailbox is one key.
///
/// Only the shape is checked (one `@`, a non-empty local part, a dotted domain, no spaces,
/// at most 254 characters); whether the mailbox exists is the sign-in provider's business.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Email(String);

/// Why a text is not an e-mail address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an e-mail address (expected name@example.com)")]
pub struct InvalidEmail {
    pub text: String,
}

impl Email {
    pub fn parse(text: &str) -> Result<Self, InvalidEmail> {
        let email = text.trim().to_lowercase();
        let valid = (3..=254).contains(&email.len())
            && !email
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ','))
            && email.split_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && domain.split('.').all(|label| !label.is_empty())
            });
        if valid {
            Ok(Self(email))
        } else {
            Err(InvalidEmail {
                text: text.to_owned(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Email {
    type Error = InvalidEmail;
    fn try_from(text: String) -> Result<Self, InvalidEmail> {
        Self::parse(&text)
    }
}

impl From<Email> for String {
    fn from(email: Email) -> String {
        email.0
    }
}

/// What an account may see beyond its own data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccountRole {
    /// Every account: its own conversations, records and usage.
    User,
    /// Operates the service (accounts, budgets).
    Admin,
    /// Reads the money side (budget reports).
    Finance,
}

impl AccountRole {
    pub const ALL: [AccountRole; 3] = [AccountRole::User, AccountRole::Admin, AccountRole::Finance];

    pub fn as_str(self) -> &'static str {
        match self {
            AccountRole::User => "user",
            AccountRole::Admin => "admin",
            AccountRole::Finance => "finance",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of [`AccountRole`]s. The default is `user` alone.
///
/// Stored as its [`Display`](fmt::Display) form, the role names joined by `,` in the order of
/// [`AccountRole::ALL`] (`user,admin`), read back by [`Roles::parse`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Roles(u8);

impl Roles {
    /// No role at all.
    pub const NONE: Roles = Roles(0);

    pub fn contains(self, role: AccountRole) -> bool {
        self.0 & role.bit() != 0
    }

    pub fn insert(&mut self, role: AccountRole) {
        self.0 |= role.bit();
    }

    pub fn with(mut self, role: AccountRole) -> Self {
        self.insert(role);
        self
    }

    pub fn iter(self) -> impl Iterator<Item = AccountRole> {
        AccountRole::ALL
            .into_iter()
            .filter(move |r| self.contains(*r))
    }

    /// Role names separated by `,` (spaces around them are ignored; the empty text is no role);
    /// `None` when a name is unknown.
    pub fn parse(text: &str) -> Option<Self> {
        text.split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .try_fold(Roles::NONE, |roles, name| {
                AccountRole::parse(name).map(|r| roles.with(r))
            })
    }
}

impl Default for Roles {
    fn default() -> Self {
        Roles::NONE.with(AccountRole::User)
    }
}

impl fmt::Display for Roles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, role) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(role.as_str())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Roles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl FromIterator<AccountRole> for Roles {
    fn from_iter<I: IntoIterator<Item = AccountRole>>(roles: I) -> Self {
        roles.into_iter().fold(Roles::NONE, Roles::with)
    }
}

impl Serialize for Roles {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Roles {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Vec::<AccountRole>::deserialize(deserializer)?
            .into_iter()
            .collect())
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
    /// Unique across accounts. `None` for accounts made without one (the local web user, a
    /// channel user created on first contact, accounts stored before e-mails existed).
    pub email: Option<Email>,
    pub roles: Roles,
    /// When the account was created; 0 for accounts stored before this was recorded.
    pub created_at_ms: i64,
    /// How far the person's assistant may reach for them; the person changes it. Accounts
    /// stored before grants existed read as the default, [`Grant::Risky`] (everything, a risky
    /// call still waiting for the person's yes).
    pub assistant_grant: Grant,
    /// The person signed out everywhere then: a web session started at or before it no longer
    /// signs anyone in, nor does a sign-in the identity provider authenticated by then. 0: never.
    /// Only ever moves later ([`Accounts::end_sessions`]; [`Accounts::put_account`] keeps the
    /// later of the stored and the given).
    #[serde(default)]
    pub sessions_ended_at_ms: i64,
}

impl Account {
    /// An active account with the `user` role, in UTC, without e-mail, created at 0, with the
    /// default assistant grant: fill in what you know with struct update syntax.
    pub fn new(user: impl Into<UserId>, display_name: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            status: AccountStatus::Active,
            display_name: display_name.into(),
            time_zone: "UTC".into(),
            email: None,
            roles: Roles::default(),
            created_at_ms: 0,
            assistant_grant: Grant::default(),
            sessions_ended_at_ms: 0,
        }
    }

    /// Where this account sits in [`Accounts::accounts_page`]'s order.
    pub fn cursor(&self) -> AccountCursor {
        AccountCursor {
            created_at_ms: self.created_at_ms,
            user: self.user.clone(),
        }
    }
}

/// A position in the account listing: accounts are listed by `created_at_ms`, then by user id
/// (byte order), both ascending. A page after a cursor starts with the first account past it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccountCursor {
    pub created_at_ms: i64,
    pub user: UserId,
}

/// One page of the account listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountPage {
    pub accounts: Vec<Account>,
    /// Where the next page starts; `None` when this page is the last.
    pub next: Option<AccountCursor>,
}

/// Why an account could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateAccountError {
    /// An account with this user id exists; nothing was written.
    #[error("an account with id {0} already exists")]
    UserTaken(UserId),
    /// Another account has this e-mail address; nothing was written.
    #[error("the e-mail address {0} already belongs to an account")]
    EmailTaken(Email),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Users, their status and roles.
///
/// E-mail addresses are unique: the store enforces it (a unique index, a guard item written in
/// the same transaction), so two concurrent creations with one address have one winner.
#[async_trait]
pub trait Accounts: Send + Sync {
    async fn account(&self, user: &UserId) -> Result<Option<Account>, StoreError>;

    /// The account with this e-mail address, if any.
    async fn account_by_email(&self, email: &Email) -> Result<Option<Account>, StoreError>;

    /// Up to `limit` accounts after `after` (from the first when `None`), in the order
    /// [`AccountCursor`] describes. `next` is set when more accounts follow.
    async fn accounts_page(
        &self,
        after: Option<&AccountCursor>,
        limit: usize,
    ) -> Result<AccountPage, StoreError>;

    /// Store a new account. [`CreateAccountError::UserTaken`] when the user id exists,
    /// [`CreateAccountError::EmailTaken`] when another account has the e-mail address; in both
    /// cases nothing is written.
    async fn create_account(&self, account: &Account) -> Result<(), CreateAccountError>;

    /// Create or replace the account. [`StoreError::Conflict`] when its e-mail address belongs
    /// to another account (nothing is written). A replaced address is free again. The stored
    /// [`Account::sessions_ended_at_ms`] is kept when it is the later one: a replacement read
    /// before a sign-out everywhere does not undo it.
    async fn put_account(&self, account: &Account) -> Result<(), StoreError>;

    /// Change an account's status; [`StoreError::NotFound`] when there is no such account.
    async fn set_account_status(
        &self,
        user: &UserId,
        status: AccountStatus,
    ) -> Result<(), StoreError>;

    /// Change how far an account's assistant may reach; [`StoreError::NotFound`] when there is
    /// no such account. Only that field changes. (The default reads and puts the account, so a
    /// concurrent change of another field may be lost; the adapters update the one field.)
    async fn set_assistant_grant(&self, user: &UserId, grant: Grant) -> Result<(), StoreError> {
        read_change_put(self, user, |account| Account {
            assistant_grant: grant,
            ..account
        })
        .await
    }

    /// Sign the account out everywhere as of `at_ms` (see [`Account::sessions_ended_at_ms`]);
    /// an earlier time than the one stored changes nothing. [`StoreError::NotFound`] when there
    /// is no such account. (The default reads and puts the account, as
    /// [`Accounts::set_assistant_grant`]'s does; the adapters update the one field.)
    async fn end_sessions(&self, user: &UserId, at_ms: i64) -> Result<(), StoreError> {
        read_change_put(self, user, |account| Account {
            sessions_ended_at_ms: account.sessions_ended_at_ms.max(at_ms),
            ..account
        })
        .await
    }

    /// Every account, in listing order (page after page).
    async fn all_accounts(&self) -> Result<Vec<Account>, StoreError> {
        const PAGE: usize = 100;
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = self.accounts_page(after.as_ref(), PAGE).await?;
            all.extend(page.accounts);
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(all),
            }
        }
    }
}

/// The default one-field setters' way: read `user`'s account, change it, put it back;
/// [`StoreError::NotFound`] when there is none.
async fn read_change_put<S: Accounts + ?Sized>(
    store: &S,
    user: &UserId,
    change: impl FnOnce(Account) -> Account + Send,
) -> Result<(), StoreError> {
    let account = store
        .account(user)
        .await?
        .ok_or_else(|| StoreError::NotFound {
            what: format!("account {user}"),
        })?;
    store.put_account(&change(account)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised_and_checked() {
        let email = Email::parse("  Ada.Lovelace@Example.ORG ").unwrap();
        assert_eq!(email.as_str(), "ada.lovelace@example.org");
        for bad in [
            "",
            "ada",
            "@example.org",
            "ada@",
            "ada@example",
            "ada@@example.org",
            "ada@example..org",
            "ada lovelace@example.org",
            "a@b.",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?} must be refused");
        }
        let err = Email::parse("nope").unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"nope\" is not an e-mail address (expected name@example.com)"
        );
    }

    #[test]
    fn roles_round_trip_through_their_text() {
        let roles = Roles::NONE
            .with(AccountRole::Finance)
            .with(AccountRole::User);
        assert_eq!(roles.to_string(), "user,finance");
        assert_eq!(Roles::parse("finance, user"), Some(roles));
        assert_eq!(Roles::parse(""), Some(Roles::NONE));
        assert_eq!(Roles::parse("user,root"), None);
        assert_eq!(Roles::default().to_string(), "user");
        assert_eq!(
            serde_json::to_string(&roles).unwrap(),
            r#"["user","finance"]"#
        );
        let back: Roles = serde_json::from_str(r#"["finance","user"]"#).unwrap();
        assert_eq!(back, roles);
    }
}
