//! The job's tracing spans: the job itself (a child of the webhook's trace when the job carries
//! one), its claim, and delivery. The turn's own spans (context, guard, model and tool calls)
//! come from the engine, inside the job's.

use queue::TurnJob;
use tracing::field::Empty;

/// The span of one job attempt, joined to the trace the job carries.
pub(crate) fn job(job: &TurnJob) -> tracing::Span {
    let span = tracing::info_span!(
        "turn_job",
        otel.kind = "consumer",
        messaging.operation.type = "process",
        channel = %job.channel,
        job = %job.dedupe_key(),
        outcome = Empty,
        cost_usd = Empty,
    );
    telemetry::follow(&span, &job.trace_context);
    span
}

/// The claim's conditional write.
pub(crate) fn claim() -> tracing::Span {
    tracing::info_span!("job_claim", outcome = Empty)
}

/// Sending the reply through the channel and recording what went out.
pub(crate) fn delivery(channel: &str) -> tracing::Span {
    tracing::info_span!("delivery", channel = %channel)
}
