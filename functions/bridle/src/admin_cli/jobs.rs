//! `bridle jobs dead` and `bridle jobs retry`: the local queue's dead letters — messages whose
//! every attempt failed (the user was told), and jobs this build cannot read (named apart, never
//! run; nobody was told) — listed, and put back to be answered.

use super::{CliError, render};
use queue_sqlite::SqliteQueue;
use serde_json::json;
use std::io::Write;

/// List the dead jobs, oldest first: a table, or JSON.
pub fn list_dead(queue: &SqliteQueue, json: bool, out: &mut impl Write) -> Result<(), CliError> {
    let dead = queue
        .dead_letters()
        .map_err(CliError::unavailable("cannot read the dead letters"))?;
    let unreadable = queue
        .unreadable_dead_letters()
        .map_err(CliError::unavailable("cannot read the dead letters"))?;
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
            .chain(
                unreadable
                    .iter()
                    .map(|seq| json!({"id": seq, "unreadable": true})),
            )
            .collect();
        writeln!(out, "{}", serde_json::Value::Array(rows))?;
        return Ok(());
    }
    if !unreadable.is_empty() {
        let ids: Vec<String> = unreadable.iter().map(ToString::to_string).collect();
        writeln!(
            out,
            "Dead jobs this build cannot read (written by another build, or edited by hand): {}.",
            ids.join(", ")
        )?;
    }
    if dead.is_empty() {
        match unreadable.is_empty() {
            true => writeln!(out, "No dead jobs.")?,
            false => writeln!(out, "No other dead jobs.")?,
        }
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
            d.seq,
            render::shown(&d.job.channel),
            render::shown(&d.job.conversation_key),
            d.receive_count
        )?;
    }
    Ok(())
}

/// Put dead job `id` (or all with `None`) back in the queue.
pub fn retry(queue: &SqliteQueue, id: Option<i64>, out: &mut impl Write) -> Result<(), CliError> {
    let n = queue
        .retry_dead(id)
        .map_err(CliError::unavailable("cannot put the jobs back"))?;
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

/// An SQS client from the standard AWS environment (region, credentials, `AWS_ENDPOINT_URL`).
pub async fn sqs_client() -> aws_sdk_sqs::Client {
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    aws_sdk_sqs::Client::new(&aws)
}

/// List the dead letters of the SQS dead-letter queue at `dlq_url`: a table, or JSON. SQS
/// shows each conversation's oldest dead letters; a line says how many more wait behind them.
pub async fn list_dead_sqs(
    client: &aws_sdk_sqs::Client,
    dlq_url: &str,
    json: bool,
    out: &mut impl Write,
) -> Result<(), CliError> {
    let view = queue_sqs::dead_letters(client, dlq_url)
        .await
        .map_err(CliError::unavailable("cannot read the dead-letter queue"))?;
    let field = |m: &queue_sqs::DeadMessage, f: fn(&queue::TurnJob) -> &str| {
        m.job.as_ref().map_or("(unreadable)", f).to_owned()
    };
    if json {
        let rows: Vec<_> = view
            .messages
            .iter()
            .map(|m| {
                json!({
                    "id": m.message_id,
                    "channel": field(m, |j| &j.channel),
                    "conversation": field(m, |j| &j.conversation_key),
                    "message_id": field(m, |j| &j.message_id),
                    "receive_count": m.receive_count,
                    "sent_at_ms": m.sent_at_ms,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::Value::Array(rows))?;
        return Ok(());
    }
    if view.messages.is_empty() && view.more == 0 {
        writeln!(out, "No dead jobs.")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<38} {:<10} {:<40} {:<6} SENT AT (UTC)",
        "ID", "CHANNEL", "CONVERSATION", "TRIES"
    )?;
    for m in &view.messages {
        let at = jiff::Timestamp::from_millisecond(m.sent_at_ms)
            .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
            .unwrap_or_default();
        writeln!(
            out,
            "{:<38} {:<10} {:<40} {:<6} {at}",
            render::shown(&m.message_id),
            render::shown(&field(m, |j| &j.channel)),
            render::shown(&field(m, |j| &j.conversation_key)),
            m.receive_count
        )?;
    }
    if view.more > 0 {
        writeln!(
            out,
            "About {} more wait behind these in their conversations; they show once these are \
             retried.",
            view.more
        )?;
    }
    Ok(())
}

/// Move dead letter `id` (an SQS message id; or all with `None`) from `dlq_url` back to
/// `queue_url`, where the worker answers it.
pub async fn retry_sqs(
    client: &aws_sdk_sqs::Client,
    dlq_url: &str,
    queue_url: &str,
    id: Option<&str>,
    out: &mut impl Write,
) -> Result<(), CliError> {
    let n = queue_sqs::redrive(client, dlq_url, queue_url, id)
        .await
        .map_err(CliError::unavailable("cannot put the jobs back"))?;
    match (id, n) {
        (Some(id), 0) => Err(CliError::refused(format!(
            "There is no dead job {id} in view (bridle jobs dead --dlq-url lists them)."
        ))),
        (Some(id), _) => Ok(writeln!(
            out,
            "Job {id} is queued again; the worker answers it."
        )?),
        (None, n) => Ok(writeln!(
            out,
            "{n} job(s) queued again; the worker answers them."
        )?),
    }
}
