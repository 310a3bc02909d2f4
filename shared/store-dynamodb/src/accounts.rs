//! `Accounts` (`USER#<user>` / `ACCOUNT`, listed in `gsi1` under `ACCOUNTS`; an e-mail
//! address is claimed by its guard item `EMAIL#<address>` / `EMAIL`, written in the same
//! `TransactWriteItems` as the account with `attribute_not_exists`, so an address has one
//! account however many write at once) and `ActiveRecords` (`CONV#<id>` / `ACTIVE#<kind>`:
//! plain puts and consistent reads).
//!
//! Replacing an account reads it first and conditions the write on the e-mail it read; its new
//! address's guard is claimed and its old one released in the same transaction. A crash cannot
//! leave a guard without its account or the other way round: it is one transaction.

use crate::DynamoStore;
use crate::audit::refused_items;
use crate::error::{unavailable, write_error};
use crate::item::{Item, corrupt, get_n, get_s, n, s};
use crate::keys::{
    ACCOUNT, ACCOUNTS, EMAIL, GSI1, GSI1PK, GSI1SK, PK, SK, account_gsi1sk, account_pk, active_sk,
    conversation_pk, email_pk,
};
use crate::records::TRIES;
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use store::{
    Account, AccountCursor, AccountPage, AccountStatus, Accounts, ActiveRecords,
    CreateAccountError, Email, Record, Roles, StoreError,
};
use transcript::{ConversationId, Grant, UserId};

const STATUS: &str = "status";
const DISPLAY_NAME: &str = "display_name";
const TIME_ZONE: &str = "time_zone";
const EMAIL_ATTR: &str = "email";
const ROLES: &str = "roles";
const CREATED_AT_MS: &str = "created_at_ms";
const ASSISTANT_GRANT: &str = "assistant_grant";
const SESSIONS_ENDED_AT_MS: &str = "sessions_ended_at_ms";
const USER_ID: &str = "user_id";
const RID: &str = "rid";

#[async_trait]
impl Accounts for DynamoStore {
    async fn account(&self, user: &UserId) -> Result<Option<Account>, StoreError> {
        self.get(account_pk(user), ACCOUNT.into())
            .await?
            .map(|item| account_from(user, &item))
            .transpose()
    }

    async fn account_by_email(&self, email: &Email) -> Result<Option<Account>, StoreError> {
        let Some(guard) = self.get(email_pk(email.as_str()), EMAIL.into()).await? else {
            return Ok(None);
        };
        let user = UserId(get_s(&guard, USER_ID, &format!("e-mail {email}"))?.to_owned());
        // The guard and the account are written in one transaction; the check is belt and
        // braces against a guard item edited by hand.
        Ok(self
            .account(&user)
            .await?
            .filter(|a| a.email.as_ref() == Some(email)))
    }

    async fn accounts_page(
        &self,
        after: Option<&AccountCursor>,
        limit: usize,
    ) -> Result<AccountPage, StoreError> {
        let mut query = self
            .query()
            .index_name(GSI1)
            .expression_attribute_names("#pk", GSI1PK)
            .expression_attribute_values(":pk", s(ACCOUNTS));
        query = match after {
            None => query.key_condition_expression("#pk = :pk"),
            Some(c) => query
                .key_condition_expression("#pk = :pk AND #sk > :after")
                .expression_attribute_names("#sk", GSI1SK)
                .expression_attribute_values(":after", s(account_gsi1sk(c.created_at_ms, &c.user))),
        };
        // One more than asked: whether it exists says whether there is a next page.
        let wanted = limit.saturating_add(1);
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let room = i32::try_from(wanted - items.len()).unwrap_or(i32::MAX);
            let page = query
                .clone()
                .limit(self.page_limit.map_or(room, |cap| cap.min(room)))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            items.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() && items.len() < wanted => start = Some(key),
                _ => break,
            }
        }
        let mut accounts = items
            .iter()
            .map(|item| {
                let user = UserId(get_s(item, USER_ID, "account listing entry")?.to_owned());
                account_from(&user, item)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let more = accounts.len() > limit;
        accounts.truncate(limit);
        let next = more.then(|| accounts.last().map(Account::cursor)).flatten();
        Ok(AccountPage { accounts, next })
    }

    async fn create_account(&self, account: &Account) -> Result<(), CreateAccountError> {
        let mut writes = vec![put_write(
            self.put_request(account_item(account), "attribute_not_exists(pk)")?,
        )];
        if let Some(email) = &account.email {
            writes.push(put_write(self.put_request(
                email_item(email, &account.user),
                "attribute_not_exists(pk)",
            )?));
        }
        let sent = crate::transact::send(
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes)),
        )
        .await;
        let Err(err) = sent else { return Ok(()) };
        match refused_items(&err).as_deref() {
            Some([true, ..]) => Err(CreateAccountError::UserTaken(account.user.clone())),
            Some([_, true, ..]) => match &account.email {
                Some(email) => Err(CreateAccountError::EmailTaken(email.clone())),
                None => Err(unavailable(err).into()),
            },
            _ => Err(unavailable(err).into()),
        }
    }

    async fn put_account(&self, account: &Account) -> Result<(), StoreError> {
        for _ in 0..TRIES {
            let stored = self.account(&account.user).await?;
            // A sign-out everywhere stored since the caller read the account is kept; one made
            // between this read and the write fails the write's condition, and is read again.
            let account = &Account {
                sessions_ended_at_ms: stored
                    .as_ref()
                    .map_or(0, |a| a.sessions_ended_at_ms)
                    .max(account.sessions_ended_at_ms),
                ..account.clone()
            };
            let old = stored.map(|a| a.email).map(|e| e.map(String::from));
            let new = account.email.as_ref().map(Email::as_str);
            // The account must still hold the e-mail read above, or the guards below would
            // be for the wrong address.
            let mut account_put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(account_item(account)));
            account_put = match &old {
                None => account_put.condition_expression("attribute_not_exists(pk)"),
                Some(None) => account_put
                    .condition_expression(
                        "attribute_exists(pk) AND attribute_not_exists(#email) \
                         AND (attribute_not_exists(#ended) OR #ended <= :ended)",
                    )
                    .expression_attribute_names("#email", EMAIL_ATTR),
                Some(Some(old)) => account_put
                    .condition_expression(
                        "#email = :old AND (attribute_not_exists(#ended) OR #ended <= :ended)",
                    )
                    .expression_attribute_names("#email", EMAIL_ATTR)
                    .expression_attribute_values(":old", s(old)),
            };
            if old.is_some() {
                account_put = account_put
                    .expression_attribute_names("#ended", SESSIONS_ENDED_AT_MS)
                    .expression_attribute_values(":ended", n(account.sessions_ended_at_ms));
            }
            let mut writes = vec![put_write(account_put.build().map_err(unavailable)?)];
            let old = old.flatten();
            let claims_email = new.filter(|n| old.as_deref() != Some(*n)).is_some();
            if let (true, Some(email)) = (claims_email, &account.email) {
                writes.push(put_write(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(email_item(email, &account.user)))
                        .condition_expression("attribute_not_exists(pk) OR #user = :user")
                        .expression_attribute_names("#user", USER_ID)
                        .expression_attribute_values(":user", s(&account.user.0))
                        .build()
                        .map_err(unavailable)?,
                ));
            }
            if let Some(old) = old.as_deref().filter(|o| new != Some(*o)) {
                writes.push(
                    TransactWriteItem::builder()
                        .delete(
                            Delete::builder()
                                .table_name(&self.table)
                                .key(PK, s(email_pk(old)))
                                .key(SK, s(EMAIL))
                                .condition_expression("#user = :user")
                                .expression_attribute_names("#user", USER_ID)
                                .expression_attribute_values(":user", s(&account.user.0))
                                .build()
                                .map_err(unavailable)?,
                        )
                        .build(),
                );
            }
            let sent = crate::transact::send(
                self.client
                    .transact_write_items()
                    .set_transact_items(Some(writes)),
            )
            .await;
            let Err(err) = sent else { return Ok(()) };
            let Some(refused) = refused_items(&err) else {
                return Err(unavailable(err));
            };
            if claims_email && refused.get(1) == Some(&true) {
                return Err(StoreError::Conflict {
                    what: format!("e-mail {}", new.unwrap_or_default()),
                });
            }
            if !refused.iter().any(|r| *r) {
                return Err(unavailable(err));
            }
            // The account changed between the read and the write: read it again.
        }
        Err(StoreError::Unavailable(
            format!("account {}: too many concurrent writers", account.user).into(),
        ))
    }

    async fn set_account_status(
        &self,
        user: &UserId,
        status: AccountStatus,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(account_pk(user)))
            .key(SK, s(ACCOUNT))
            .update_expression("SET #status = :status")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#status", STATUS)
            .expression_attribute_values(":status", s(status.as_str()))
            .send()
            .await
            .map_err(|e| {
                write_error(e, || StoreError::NotFound {
                    what: format!("account {user}"),
                })
            })?;
        Ok(())
    }

    async fn set_assistant_grant(&self, user: &UserId, grant: Grant) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(account_pk(user)))
            .key(SK, s(ACCOUNT))
            .update_expression("SET #grant = :grant")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#grant", ASSISTANT_GRANT)
            .expression_attribute_values(":grant", s(grant.as_str()))
            .send()
            .await
            .map_err(|e| {
                write_error(e, || StoreError::NotFound {
                    what: format!("account {user}"),
                })
            })?;
        Ok(())
    }

    async fn end_sessions(&self, user: &UserId, at_ms: i64) -> Result<(), StoreError> {
        let updated = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(account_pk(user)))
            .key(SK, s(ACCOUNT))
            .update_expression("SET #ended = :at")
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(#ended) OR #ended < :at)",
            )
            .expression_attribute_names("#ended", SESSIONS_ENDED_AT_MS)
            .expression_attribute_values(":at", n(at_ms))
            .send()
            .await
            .map_err(|e| {
                write_error(e, || StoreError::Conflict {
                    what: String::new(),
                })
            });
        match updated {
            Ok(_) => Ok(()),
            // Refused: no account, or one already signed out as late (one more read, to say
            // which).
            Err(StoreError::Conflict { .. }) => match self.account(user).await? {
                Some(_) => Ok(()),
                None => Err(StoreError::NotFound {
                    what: format!("account {user}"),
                }),
            },
            Err(e) => Err(e),
        }
    }
}

/// The account's item, with its entry in the `ACCOUNTS` listing (`gsi1`).
fn account_item(account: &Account) -> Item {
    let mut item = Item::from([
        (PK.into(), s(account_pk(&account.user))),
        (SK.into(), s(ACCOUNT)),
        (USER_ID.into(), s(&account.user.0)),
        (STATUS.into(), s(account.status.as_str())),
        (DISPLAY_NAME.into(), s(&account.display_name)),
        (TIME_ZONE.into(), s(&account.time_zone)),
        (ROLES.into(), s(account.roles.to_string())),
        (CREATED_AT_MS.into(), n(account.created_at_ms)),
        (ASSISTANT_GRANT.into(), s(account.assistant_grant.as_str())),
        (SESSIONS_ENDED_AT_MS.into(), n(account.sessions_ended_at_ms)),
        (GSI1PK.into(), s(ACCOUNTS)),
        (
            GSI1SK.into(),
            s(account_gsi1sk(account.created_at_ms, &account.user)),
        ),
    ]);
    if let Some(email) = &account.email {
        item.insert(EMAIL_ATTR.into(), s(email.as_str()));
    }
    item
}

/// The guard item that makes an e-mail address one account's.
fn email_item(email: &Email, user: &UserId) -> Item {
    Item::from([
        (PK.into(), s(email_pk(email.as_str()))),
        (SK.into(), s(EMAIL)),
        (USER_ID.into(), s(&user.0)),
    ])
}

/// An account from its item. Items written before e-mails, roles, creation times, grants and
/// sign-outs everywhere existed read as no e-mail, the `user` role, 0, the default grant and 0.
pub(crate) fn account_from(user: &UserId, item: &Item) -> Result<Account, StoreError> {
    let what = format!("account {user}");
    let status = get_s(item, STATUS, &what)?;
    let roles = match item.get(ROLES) {
        None => Roles::default(),
        Some(_) => {
            let text = get_s(item, ROLES, &what)?;
            Roles::parse(text).ok_or_else(|| corrupt(&what, format!("unknown roles {text:?}")))?
        }
    };
    Ok(Account {
        user: user.clone(),
        status: AccountStatus::parse(status)
            .ok_or_else(|| corrupt(&what, format!("unknown status {status:?}")))?,
        display_name: get_s(item, DISPLAY_NAME, &what)?.to_owned(),
        time_zone: get_s(item, TIME_ZONE, &what)?.to_owned(),
        email: match item.get(EMAIL_ATTR) {
            None => None,
            Some(_) => {
                Some(Email::parse(get_s(item, EMAIL_ATTR, &what)?).map_err(|e| corrupt(&what, e))?)
            }
        },
        roles,
        created_at_ms: match item.get(CREATED_AT_MS) {
            None => 0,
            Some(_) => get_n(item, CREATED_AT_MS, &what)?,
        },
        assistant_grant: match item.get(ASSISTANT_GRANT) {
            None => Grant::default(),
            Some(_) => {
                let text = get_s(item, ASSISTANT_GRANT, &what)?;
                Grant::parse(text)
                    .ok_or_else(|| corrupt(&what, format!("unknown assistant grant {text:?}")))?
            }
        },
        sessions_ended_at_ms: match item.get(SESSIONS_ENDED_AT_MS) {
            None => 0,
            Some(_) => get_n(item, SESSIONS_ENDED_AT_MS, &what)?,
        },
    })
}

fn put_write(put: Put) -> TransactWriteItem {
    TransactWriteItem::builder().put(put).build()
}

#[async_trait]
impl ActiveRecords for DynamoStore {
    async fn set_active(
        &self,
        conversation: &ConversationId,
        kind: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        self.put(Item::from([
            (PK.into(), s(conversation_pk(conversation))),
            (SK.into(), s(active_sk(kind))),
            (RID.into(), s(id)),
        ]))
        .await
    }

    async fn active(
        &self,
        conversation: &ConversationId,
        kind: &str,
    ) -> Result<Option<String>, StoreError> {
        let item = self
            .get(conversation_pk(conversation), active_sk(kind))
            .await?;
        item.map(|item| {
            get_s(&item, RID, &format!("active {kind} of {conversation}")).map(str::to_owned)
        })
        .transpose()
    }

    /// Two calls (a Query and a GetItem), made at once.
    async fn records_with_active(
        &self,
        owner: &UserId,
        kind: &str,
        conversation: &ConversationId,
    ) -> Result<(Vec<Record>, Option<String>), StoreError> {
        futures::try_join!(
            store::Records::records_of(self, owner, kind),
            self.active(conversation, kind)
        )
    }
}

impl DynamoStore {
    async fn get(&self, pk: String, sk: String) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(pk))
            .key(SK, s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(out.item)
    }

    fn put_request(&self, item: Item, condition: &str) -> Result<Put, StoreError> {
        Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition)
            .build()
            .map_err(unavailable)
    }

    async fn put(&self, item: Item) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::AccountRole;

    #[test]
    fn an_account_item_is_listed_and_reads_back() {
        let account = Account {
            email: Some(Email::parse("Ada@Example.org").unwrap()),
            roles: Roles::default().with(AccountRole::Admin),
            created_at_ms: 7,
            ..Account::new("ada#1", "Ada")
        };
        let item = account_item(&account);
        assert_eq!(item[PK], s("USER#ada#1"));
        assert_eq!(item[SK], s("ACCOUNT"));
        assert_eq!(item[EMAIL_ATTR], s("ada@example.org"));
        assert_eq!(item[ROLES], s("user,admin"));
        assert_eq!(item[GSI1PK], s("ACCOUNTS"));
        assert_eq!(item[GSI1SK], s(account_gsi1sk(7, &"ada#1".into())));
        assert_eq!(account_from(&account.user, &item).unwrap(), account);
    }

    #[test]
    fn an_old_account_item_reads_with_defaults() {
        let item = Item::from([
            (STATUS.into(), s("paused")),
            (DISPLAY_NAME.into(), s("Bo")),
            (TIME_ZONE.into(), s("UTC")),
        ]);
        let account = account_from(&"bo".into(), &item).unwrap();
        assert_eq!(
            account,
            Account {
                status: AccountStatus::Paused,
                ..Account::new("bo", "Bo")
            }
        );
        let mut bad = item.clone();
        bad.insert(ROLES.into(), s("user,root"));
        assert!(matches!(
            account_from(&"bo".into(), &bad),
            Err(StoreError::Corrupt { .. })
        ));
        let mut narrowed = item;
        narrowed.insert(ASSISTANT_GRANT.into(), s("read"));
        assert_eq!(
            account_from(&"bo".into(), &narrowed)
                .unwrap()
                .assistant_grant,
            Grant::Read
        );
        narrowed.insert(ASSISTANT_GRANT.into(), s("admin"));
        assert!(matches!(
            account_from(&"bo".into(), &narrowed),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
