//! `ToolResults`: one item per finished tool call, in the conversation's partition
//! (`CONV#<id>` / `TOOL#<asked-at position>#<call id>`), written once with a conditional put.
//! A call's receipt (`CALL#<call key>` / `RECEIPT`) is one more item of its effect's
//! `TransactWriteItems`, conditional on not existing.

use crate::DynamoStore;
use crate::error::unavailable;
use crate::error::write_error;
use crate::item::{Item, corrupt, get_s, s};
use crate::keys::{PK, RECEIPT, SK, conversation_pk, receipt_pk};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use serde_json::Value;
use std::collections::HashMap;
use store::{Receipt, StoreError, ToolResults};
use transcript::{ConversationId, Part};

const BODY: &str = "body";
const CALL: &str = "call_id";

fn prefix(asked_at: u64) -> String {
    format!("TOOL#{asked_at:020}#")
}

/// A tool call's result as the item it is stored as, and its name for errors.
fn tool_result_item(
    conversation: &ConversationId,
    asked_at: u64,
    tool_use_id: &str,
    result: &Part,
) -> Result<(Item, String), StoreError> {
    let what = format!("tool result {conversation}@{asked_at}#{tool_use_id}");
    let body = serde_json::to_string(result).map_err(|e| corrupt(&what, e))?;
    let item = Item::from([
        (PK.into(), s(conversation_pk(conversation))),
        (SK.into(), s(format!("{}{tool_use_id}", prefix(asked_at)))),
        (CALL.into(), s(tool_use_id)),
        (BODY.into(), s(body)),
    ]);
    Ok((item, what))
}

impl DynamoStore {
    /// [`ToolResults::put_tool_result`] as a transaction's put (refused when recorded already).
    pub(crate) fn tool_result_put(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
    ) -> Result<(TransactWriteItem, String), StoreError> {
        let (item, what) = tool_result_item(conversation, asked_at, tool_use_id, result)?;
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(unavailable)?;
        Ok((TransactWriteItem::builder().put(put).build(), what))
    }
}

#[async_trait]
impl ToolResults for DynamoStore {
    async fn put_tool_result(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
    ) -> Result<(), StoreError> {
        let (item, what) = tool_result_item(conversation, asked_at, tool_use_id, result)?;
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await
            .map_err(|e| write_error(e, || StoreError::Conflict { what }))?;
        Ok(())
    }

    async fn tool_results(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
    ) -> Result<HashMap<String, Part>, StoreError> {
        let query = self
            .query()
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :tool)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(conversation_pk(conversation)))
            .expression_attribute_values(":tool", s(prefix(asked_at)))
            .consistent_read(true);
        let mut out = HashMap::new();
        for item in self.query_all(query).await? {
            let what = format!("tool result {conversation}@{asked_at}");
            let id = get_s(&item, CALL, &what)?.to_owned();
            let part =
                serde_json::from_str(get_s(&item, BODY, &what)?).map_err(|e| corrupt(&what, e))?;
            out.insert(id, part);
        }
        Ok(out)
    }

    async fn receipt(&self, call_key: &str) -> Result<Option<Value>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(receipt_pk(call_key)))
            .key(SK, s(RECEIPT))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        let what = format!("receipt {call_key}");
        out.item
            .map(|item| {
                serde_json::from_str(get_s(&item, BODY, &what)?).map_err(|e| corrupt(&what, e))
            })
            .transpose()
    }
}

impl DynamoStore {
    /// A receipt as a `Put` that must not overwrite one (a racing attempt of the same call).
    pub(crate) fn receipt_put(&self, receipt: &Receipt) -> Result<TransactWriteItem, StoreError> {
        let what = format!("receipt {}", receipt.call_key);
        let body = serde_json::to_string(&receipt.output).map_err(|e| corrupt(&what, e))?;
        let put = Put::builder()
            .table_name(&self.table)
            .item(PK, s(receipt_pk(&receipt.call_key)))
            .item(SK, s(RECEIPT))
            .item(BODY, s(body))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }
}
