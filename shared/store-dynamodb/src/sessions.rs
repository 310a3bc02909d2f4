//! `Sessions`: a session is `SESSION#<hash>` / `SESSION`, a verified sign-in's state
//! `LOGIN#<state>` / `LOGIN`, both with a `ttl` so DynamoDB clears them after they end (and
//! filtered until it does). Recording a sign-in is one conditional `PutItem`, so it happens
//! once.

use crate::DynamoStore;
use crate::error::unavailable;
use crate::item::{get_n, get_s, n, s, ttl_for};
use crate::keys::{PK, SK, TTL};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use store::{Session, Sessions, StoreError};

const SESSION: &str = "SESSION";
const LOGIN: &str = "LOGIN";
const USER_ID: &str = "user_id";
const CSRF: &str = "csrf";
const CREATED_AT_MS: &str = "created_at_ms";
const EXPIRES_AT_MS: &str = "expires_at_ms";
const KEEP_UNTIL_MS: &str = "keep_until_ms";

fn session_pk(id_hash: &str) -> String {
    format!("{SESSION}#{id_hash}")
}

fn login_pk(state: &str) -> String {
    format!("{LOGIN}#{state}")
}

#[async_trait]
impl Sessions for DynamoStore {
    async fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        // Applied once ([`crate::transact::write_once`]): a new session whose answer was lost
        // would otherwise fail as taken by itself, and the sign-in with it.
        let put = Put::builder()
            .table_name(&self.table)
            .item(PK, s(session_pk(&session.id_hash)))
            .item(SK, s(SESSION))
            .item(USER_ID, s(&session.user.0))
            .item(CSRF, s(&session.csrf))
            .item(CREATED_AT_MS, n(session.created_at_ms))
            .item(EXPIRES_AT_MS, n(session.expires_at_ms))
            .item(TTL, n(ttl_for(session.expires_at_ms)))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(unavailable)?;
        match crate::transact::write_once(
            &self.client,
            TransactWriteItem::builder().put(put).build(),
        )
        .await?
        {
            true => Ok(()),
            false => Err(StoreError::Conflict {
                what: "session".into(),
            }),
        }
    }

    async fn session(&self, id_hash: &str, now_ms: i64) -> Result<Option<Session>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(session_pk(id_hash)))
            .key(SK, s(SESSION))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let what = "session";
        let session = Session {
            id_hash: id_hash.to_owned(),
            user: get_s(&item, USER_ID, what)?.into(),
            csrf: get_s(&item, CSRF, what)?.to_owned(),
            created_at_ms: get_n(&item, CREATED_AT_MS, what)?,
            expires_at_ms: get_n(&item, EXPIRES_AT_MS, what)?,
        };
        Ok((session.expires_at_ms > now_ms).then_some(session))
    }

    async fn delete_session(&self, id_hash: &str) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key(PK, s(session_pk(id_hash)))
            .key(SK, s(SESSION))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn first_use_of_login(
        &self,
        state: &str,
        now_ms: i64,
        keep_until_ms: i64,
    ) -> Result<bool, StoreError> {
        // Applied once ([`crate::transact::write_once`]): a first use whose answer was lost
        // would otherwise read as its own replay, and the genuine sign-in be refused.
        let put = Put::builder()
            .table_name(&self.table)
            .item(PK, s(login_pk(state)))
            .item(SK, s(LOGIN))
            .item(KEEP_UNTIL_MS, n(keep_until_ms))
            .item(TTL, n(ttl_for(keep_until_ms)))
            .condition_expression("attribute_not_exists(pk) OR #keep <= :now")
            .expression_attribute_names("#keep", KEEP_UNTIL_MS)
            .expression_attribute_values(":now", n(now_ms))
            .build()
            .map_err(unavailable)?;
        crate::transact::write_once(&self.client, TransactWriteItem::builder().put(put).build())
            .await
    }
}
