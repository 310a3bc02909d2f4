//! Round trips to the database per local turn: every store, queue and notes call is a hand-off
//! to the database's thread and back (`sqlite-db`), and on this machine those wake-ups, not the
//! SQL, are most of a turn's CPU (the load benchmark, README's Measure). Counted on the one
//! [`store_sqlite::Db`] `bridle serve` gives the store, the queue and the notes, so a turn's
//! queue calls are in the count too: a server that opened a second database for one of them
//! would show fewer calls here, and fails this test as surely as one that makes more.

use backend::{Reply, ScriptedModel};
use bridle::{AppOptions, Db};
use serde_json::json;
use std::sync::Arc;
use tests::server::{TestServer, tokens};
use transcript::StopReason;

/// A plain web answer's writes: the enqueue; the delivery; the claim with the lease; the turn's
/// start (the conversation moved on, the user's message and its visible entry); the budget's
/// reservation; the answer with its settlement; the reply's record with the lease's release and
/// the job's done mark; the ack. (Before `TurnWrites` on SQLite and the queue's memory of a
/// dry look: 14 — the lease, the settlement, the release and the done mark on their own, and two
/// more deliveries that found nothing.)
const PLAIN_WRITES: u64 = 8;
/// Its reads: the web server's ownership check before the enqueue, the job's before its claim,
/// the conversation with its account and next visible position under the lease, the history,
/// and the context block's records and active record. (Before: 8 — the conversation, the
/// account and the next visible position one by one.)
const PLAIN_READS: u64 = 6;
/// One tool round adds four writes: the tool's own (the note with its receipt), the tool
/// message with its result, the next call's reservation, and its answer with the settlement.
const TOOL_ROUND_WRITES: u64 = 4;
/// And no reads: a fresh call's receipt is written with the tool's own write (it is read only
/// when a turn resumes).
const TOOL_ROUND_READS: u64 = 0;

fn per_turn(before: store_sqlite::DbCalls, after: store_sqlite::DbCalls, turns: u64) -> (f64, f64) {
    (
        (after.writes - before.writes) as f64 / turns as f64,
        (after.reads - before.reads) as f64 / turns as f64,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_turn_and_a_tool_round_make_a_fixed_number_of_database_calls() {
    let dir = std::env::temp_dir().join(format!("bridle-round-trips-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model = ScriptedModel::repeating(vec![
        Reply::text("Hello there."),
        Reply::new()
            .call("t1", "add_note", json!({"text": "buy milk"}))
            .stop(StopReason::ToolUse),
        Reply::text("Saved."),
    ]);
    let server = TestServer::start(
        Arc::new(model),
        AppOptions {
            db: Db::File(dir.join("bridle.db")),
            ..AppOptions::default()
        },
    )
    .await;
    let id = server.new_conversation().await;
    // The first turn of a conversation reads and writes a little more (its first visible
    // position, its first budget buckets); count the ones after it.
    let first = server.say(&id, "hi").await;
    assert_eq!(tokens(&first), "Hello there.");
    let plain = |server: &TestServer| server.app.db.calls();

    // Plain turns: (the repeating script answers plain, then tool, then plain again) — so the
    // tool turn in between is measured on its own below.
    let before = plain(&server);
    let tool_turn = server.say(&id, "note: buy milk").await;
    let after_tool = plain(&server);
    assert_eq!(tokens(&tool_turn), "Saved.");
    let hello = server.say(&id, "hi again").await;
    let after_plain = plain(&server);
    assert_eq!(tokens(&hello), "Hello there.");

    let (plain_writes, plain_reads) = per_turn(after_tool, after_plain, 1);
    let (tool_writes, tool_reads) = per_turn(before, after_tool, 1);
    eprintln!(
        "plain turn: {plain_writes} writes, {plain_reads} reads; turn with one tool round: \
         {tool_writes} writes, {tool_reads} reads ({:?} before, {:?} after)",
        before, after_plain
    );
    assert_eq!(
        (plain_writes, plain_reads),
        (PLAIN_WRITES as f64, PLAIN_READS as f64),
        "a plain turn's calls to the database"
    );
    assert_eq!(
        (tool_writes - plain_writes, tool_reads - plain_reads),
        (TOOL_ROUND_WRITES as f64, TOOL_ROUND_READS as f64),
        "what one tool round adds"
    );
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
