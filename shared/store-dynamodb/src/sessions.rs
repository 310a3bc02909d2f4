//! `Sessions`: a session is `SESSION#<hash>` / `SESSION`, a sign-in in progress `LOGIN#<state>` /
//! `LOGIN`, both with a `ttl` so DynamoDB clears them after they end (and filtered on read
//! until it does). Taking a sign-in is one `DeleteItem` returning the old item, so it happens
//! once.

use crate::DynamoStore;
use crate::error::{unavailable, write_error};
use crate::item::{Item, get_n, get_s, n, s, ttl_for};
use crate::keys::{PK, SK, TTL};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnValue;
use store::{PendingLogin, Session, Sessions, StoreError};

const SESSION: &str = "SESSION";
const LOGIN: &str = "LOGIN";
const USER_ID: &str = "user_id";
const CSRF: &str = "csrf";
const CREATED_AT_MS: &str = "created_at_ms";
const EXPIRES_AT_MS: &str = "expires_at_ms";
const NONCE: &str = "nonce";
const PKCE_VERIFIER: &str = "pkce_verifier";
const RETURN_TO: &str = "return_to";

fn session_pk(id_hash: &str) -> String {
    format!("{SESSION}#{id_hash}")
}

fn login_pk(state: &str) -> String {
    format!("{LOGIN}#{state}")
}

#[async_trait]
impl Sessions for DynamoStore {
    async fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .item(PK, s(session_pk(&session.id_hash)))
            .item(SK, s(SESSION))
            .item(USER_ID, s(&session.user.0))
            .item(CSRF, s(&session.csrf))
            .item(CREATED_AT_MS, n(session.created_at_ms))
            .item(EXPIRES_AT_MS, n(session.expires_at_ms))
            .item(TTL, n(ttl_for(session.expires_at_ms)))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await
            .map_err(|e| {
                write_error(e, || StoreError::Conflict {
                    what: "session".into(),
                })
            })?;
        Ok(())
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

    async fn put_login(&self, login: &PendingLogin) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .item(PK, s(login_pk(&login.state)))
            .item(SK, s(LOGIN))
            .item(NONCE, s(&login.nonce))
            .item(PKCE_VERIFIER, s(&login.pkce_verifier))
            .item(RETURN_TO, s(&login.return_to))
            .item(EXPIRES_AT_MS, n(login.expires_at_ms))
            .item(TTL, n(ttl_for(login.expires_at_ms)))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await
            .map_err(|e| {
                write_error(e, || StoreError::Conflict {
                    what: "sign-in in progress".into(),
                })
            })?;
        Ok(())
    }

    async fn take_login(
        &self,
        state: &str,
        now_ms: i64,
    ) -> Result<Option<PendingLogin>, StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(PK, s(login_pk(state)))
            .key(SK, s(LOGIN))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(unavailable)?;
        let Some(item) = out.attributes.filter(|a| !a.is_empty()) else {
            return Ok(None);
        };
        let login = decode_login(state, &item)?;
        Ok((login.expires_at_ms > now_ms).then_some(login))
    }
}

fn decode_login(state: &str, item: &Item) -> Result<PendingLogin, StoreError> {
    let what = "sign-in in progress";
    Ok(PendingLogin {
        state: state.to_owned(),
        nonce: get_s(item, NONCE, what)?.to_owned(),
        pkce_verifier: get_s(item, PKCE_VERIFIER, what)?.to_owned(),
        return_to: get_s(item, RETURN_TO, what)?.to_owned(),
        expires_at_ms: get_n(item, EXPIRES_AT_MS, what)?,
    })
}
