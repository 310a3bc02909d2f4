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

/// A plain web answer's writes: the enqueue, which hands the job to the worker's waiting
/// receive; the claim with the lease; the turn's start (the conversation moved on, the user's
/// message and its visible entry) with the model call's budget reservation; the answer with its
/// settlement; the reply's record with the lease's release and the job's done mark; the ack.
/// (Before `TurnWrites` on SQLite and the queue's memory of a dry look: 14 — the lease, the
/// settlement, the release and the done mark on their own, and two more deliveries that found
/// nothing; before the reservation went with the start: 8; before the enqueue handed its job
/// over: 7, the delivery its own write.)
const PLAIN_WRITES: u64 = 6;
/// Its reads: the context block's records with the active record, read beside the claim's
/// write (at the same time, not one after the other). The web server knows the
/// conversation's owner from the turn before (an owner never changes), and the turn's start —
/// the conversation (its owner checked) with its account, next visible position and history —
/// is read inside the claim's write, under the lease it takes. (Before: 8 — the conversation,
/// the account and the next visible position one by one; 6 — the job's owner read before its
/// claim, the history, and the records and the active record, apart; 3 — the owner read for
/// every message, the start read on its own.)
const PLAIN_READS: u64 = 1;
/// One tool round adds three writes: the tool's own (the note with its receipt), the tool
/// message with its result and the next call's reservation, and that call's answer with its
/// settlement. (Before the reservation went with the tool message: 4.)
const TOOL_ROUND_WRITES: u64 = 3;
/// And no reads: a fresh call's receipt is written with the tool's own write (it is read only
/// when a turn resumes).
const TOOL_ROUND_READS: u64 = 0;

/// How many times each kind of turn is measured; the fewest calls seen is its count. The
/// server's worker also looks at the queue every half second while idle (one write), and a
/// client that sends its next message as soon as the stream ends may beat the previous job's
/// ack (its next delivery then looks twice); either can land in one measurement, not in all.
const TRIES: usize = 4;

/// The calls `server`'s database served while it answered `text` in `id` with `reply` (and
/// the job was acknowledged).
async fn calls_of(server: &TestServer, id: &str, text: &str, reply: &str) -> (u64, u64) {
    let before = server.app.db.calls();
    let events = server.say(id, text).await;
    assert_eq!(tokens(&events), reply);
    // The ack follows the stream's end.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let after = server.app.db.calls();
    (after.writes - before.writes, after.reads - before.reads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_turn_and_a_tool_round_make_a_fixed_number_of_database_calls() {
    let dir = tempfile::Builder::new()
        .prefix("bridle-round-trips-")
        .tempdir()
        .unwrap();
    // A tool round, then a plain answer, again and again: the first turn takes the tool round,
    // then each try measures a plain turn and a tool turn.
    let model = ScriptedModel::repeating(vec![
        Reply::new()
            .call("t1", "add_note", json!({"text": "buy milk"}))
            .stop(StopReason::ToolUse),
        Reply::text("Saved."),
        Reply::text("Hello there."),
    ]);
    let server = TestServer::start(
        Arc::new(model),
        AppOptions {
            db: Db::File(dir.path().join("bridle.db")),
            ..AppOptions::default()
        },
    )
    .await;
    let id = server.new_conversation().await;
    // The first turn of a conversation reads and writes a little more (its first visible
    // position, its first budget buckets); count the ones after it.
    let first = server.say(&id, "note: buy milk").await;
    assert_eq!(tokens(&first), "Saved.");
    let (mut plain, mut tool) = ((u64::MAX, u64::MAX), (u64::MAX, u64::MAX));
    for _ in 0..TRIES {
        let p = calls_of(&server, &id, "hi", "Hello there.").await;
        let t = calls_of(&server, &id, "note: buy milk", "Saved.").await;
        plain = (plain.0.min(p.0), plain.1.min(p.1));
        tool = (tool.0.min(t.0), tool.1.min(t.1));
    }
    eprintln!(
        "plain turn: {} writes, {} reads; turn with one tool round: {} writes, {} reads \
         ({:?} in all)",
        plain.0,
        plain.1,
        tool.0,
        tool.1,
        server.app.db.calls()
    );
    assert_eq!(
        plain,
        (PLAIN_WRITES, PLAIN_READS),
        "a plain turn's calls to the database"
    );
    assert_eq!(
        (tool.0 - plain.0, tool.1 - plain.1),
        (TOOL_ROUND_WRITES, TOOL_ROUND_READS),
        "what one tool round adds"
    );
    server.stop().await;
}
