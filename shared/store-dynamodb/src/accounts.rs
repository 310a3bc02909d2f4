//! `Accounts` (`USER#<user>` / `ACCOUNT`) and `ActiveRecords` (`CONV#<id>` / `ACTIVE#<kind>`):
//! plain puts and consistent reads.

use crate::DynamoStore;
use crate::error::unavailable;
use crate::item::{Item, corrupt, get_s, s};
use crate::keys::{ACCOUNT, PK, SK, account_pk, active_sk, conversation_pk};
use async_trait::async_trait;
use store::{Account, AccountStatus, Accounts, ActiveRecords, StoreError};
use transcript::{ConversationId, UserId};

const STATUS: &str = "status";
const DISPLAY_NAME: &str = "display_name";
const TIME_ZONE: &str = "time_zone";
const RID: &str = "rid";

#[async_trait]
impl Accounts for DynamoStore {
    async fn account(&self, user: &UserId) -> Result<Option<Account>, StoreError> {
        let Some(item) = self.get(account_pk(user), ACCOUNT.into()).await? else {
            return Ok(None);
        };
        let what = format!("account {user}");
        let status = get_s(&item, STATUS, &what)?;
        Ok(Some(Account {
            user: user.clone(),
            status: AccountStatus::parse(status)
                .ok_or_else(|| corrupt(&what, format!("unknown status {status:?}")))?,
            display_name: get_s(&item, DISPLAY_NAME, &what)?.to_owned(),
            time_zone: get_s(&item, TIME_ZONE, &what)?.to_owned(),
        }))
    }

    async fn put_account(&self, account: &Account) -> Result<(), StoreError> {
        self.put(Item::from([
            (PK.into(), s(account_pk(&account.user))),
            (SK.into(), s(ACCOUNT)),
            (STATUS.into(), s(account.status.as_str())),
            (DISPLAY_NAME.into(), s(&account.display_name)),
            (TIME_ZONE.into(), s(&account.time_zone)),
        ]))
        .await
    }
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
