//! `TurnWrites`: a turn's closing writes as one `TransactWriteItems` — the reply's visible entry
//! (its head conditioned on a free position, as `append_visible`), the lease's delete
//! (conditioned on its holder, as `release_lease`) and the job's claim marked done (as
//! `finish_job`). Three calls become one; a false condition cancels all of them. And a tool
//! message with its last call's result (`put_tool_result`, then `append_message`): two become
//! one. And a model call's answer with its budget settlement (`adjust`, then `append_message`):
//! two become one.

use crate::DynamoStore;
use crate::error::write_error;
use store::{Adjustment, StoreError, TurnFinish, TurnWrites};
use transcript::{Message, Part};

#[async_trait::async_trait]
impl TurnWrites for DynamoStore {
    async fn finish_turn(&self, f: &TurnFinish<'_>) -> Result<(), StoreError> {
        let (record, what) = crate::visible::visible_record(f.entry)?;
        let mut writes = self.transact_puts(record.into_items()?)?;
        writes.push(self.lease_release(f.conversation, f.holder)?);
        writes.push(self.job_done(f.job_key, f.keep_until_ms)?);
        self.client
            .transact_write_items()
            .set_transact_items(Some(writes))
            .send()
            .await
            .map(drop)
            .map_err(|e| {
                write_error(e, || StoreError::Conflict {
                    what: format!(
                        "{what} (or the lease of {} not {}'s)",
                        f.conversation, f.holder
                    ),
                })
            })
    }

    async fn append_with_tool_result(
        &self,
        m: &Message,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
    ) -> Result<(), StoreError> {
        let (message, what) = crate::messages::message_record(m)?;
        let (recorded, result_what) =
            self.tool_result_put(&m.conversation_id, asked_at, tool_use_id, result)?;
        self.put_new_together(
            vec![message],
            vec![recorded],
            &format!("{what} or {result_what}"),
        )
        .await
    }

    async fn append_message_adjusting(
        &self,
        m: &Message,
        adjustments: &[Adjustment],
    ) -> Result<(), StoreError> {
        let (message, what) = crate::messages::message_record(m)?;
        let settled = self.adjustment_writes(adjustments)?;
        self.put_new_together(vec![message], settled, &what).await
    }
}
