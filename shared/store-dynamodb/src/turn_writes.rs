//! `TurnWrites`: a turn's closing writes as one `TransactWriteItems` — the reply's visible entry
//! (its head conditioned on a free position, as `append_visible`), the lease's delete
//! (conditioned on its holder, as `release_lease`) and the job's claim marked done (as
//! `finish_job`). Three calls become one; a false condition cancels all of them.

use crate::DynamoStore;
use crate::error::write_error;
use store::{StoreError, TurnFinish, TurnWrites};

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
}
