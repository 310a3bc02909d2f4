//! `bridle jobs dead` and `bridle jobs retry`: the local queue's dead letters — messages whose
//! every attempt failed (the user was told) — listed, and put back to be answered.

use super::CliError;
use queue_sqlite::SqliteQueue;
use serde_json::json;
use std::io::Write;

/// List the dead jobs, oldest first: a table, or JSON.
pub fn list_dead(queue: &SqliteQueue, json: bool, out: &mut impl Write) -> Result<(), CliError> {
    let dead = queue
        .dead_letters()
        .map_err(|e| CliError::refused(format!("cannot read the dead letters: {e}")))?;
    if json {
        let rows: Vec<_> = dead
            .iter()
            .map(|d| {
                json!({
                    "id": d.seq,
                    "channel": d.job.channel,
                    "conversation": d.job.conversation_key,
                    "message_id": d.job.message_id,
                    "receive_count": d.receive_count,
                    "dead_at_ms": d.dead_at_ms,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::Value::Array(rows))?;
        return Ok(());
    }
    if dead.is_empty() {
        writeln!(out, "No dead jobs.")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<6} {:<10} {:<40} {:<8} DEAD AT (UTC)",
        "ID", "CHANNEL", "CONVERSATION", "TRIES"
    )?;
    for d in &dead {
        let at = jiff::Timestamp::from_millisecond(d.dead_at_ms)
            .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
            .unwrap_or_default();
        writeln!(
            out,
            "{:<6} {:<10} {:<40} {:<8} {at}",
            d.seq, d.job.channel, d.job.conversation_key, d.receive_count
        )?;
    }
    Ok(())
}

/// Put dead job `id` (or all with `None`) back in the queue.
pub fn retry(queue: &SqliteQueue, id: Option<i64>, out: &mut impl Write) -> Result<(), CliError> {
    let n = queue
        .retry_dead(id)
        .map_err(|e| CliError::refused(format!("cannot put the jobs back: {e}")))?;
    match (id, n) {
        (Some(id), 0) => Err(CliError::refused(format!(
            "There is no dead job {id} (bridle jobs dead lists them)."
        ))),
        (Some(id), _) => Ok(writeln!(
            out,
            "Job {id} is queued again; the running server answers it."
        )?),
        (None, n) => Ok(writeln!(
            out,
            "{n} job(s) queued again; the running server answers them."
        )?),
    }
}
