//! A turn cut short (the worker died, storage failed mid-turn) is resumed by running the same
//! job again, through the one job path, once the dead worker's claim has expired: no second user
//! message, no second run of a tool whose result is stored, no model call repeated whose answer
//! is stored, one reply recorded.

use backend::{Reply, ScriptedModel};
use channel_jobs::{ChannelJobs, JobOutcome};
use engine::{CollectSink, Engine, EngineOptions, TurnEnd, TurnInput};
use queue::TurnJob;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use store::{ConversationStore, JobClaims, MessageStore, VisibleStore};
use store_sqlite::SqliteStore;
use tests::{Calls, FlakyStore, sample_tools, web_job, web_jobs};
use tools::ActionId;
use transcript::{Conversation, Role, StopReason};

/// A job's time before its claim expires (plus the claim's slack).
const BUDGET: Duration = Duration::from_secs(600);

struct Setup {
    model: Arc<ScriptedModel>,
    store: Arc<FlakyStore>,
    engine: Arc<Engine>,
    jobs: ChannelJobs,
    clock: Arc<AtomicI64>,
    calls: Calls,
}

async fn setup(replies: Vec<Reply>) -> Setup {
    setup_with(replies, EngineOptions::default()).await
}

async fn setup_with(replies: Vec<Reply>, options: EngineOptions) -> Setup {
    let sqlite = Arc::new(SqliteStore::open_in_memory().unwrap());
    let store = Arc::new(FlakyStore::new(sqlite));
    store
        .create_conversation(&Conversation::new("c1", "u1", "web", "planner"))
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(replies));
    let calls = Calls::default();
    let engine = Arc::new(Engine::new(
        model.clone(),
        Arc::new(sample_tools(calls.clone())),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..options
        },
    ));
    let clock = Arc::new(AtomicI64::new(1_800_000_000_000));
    let jobs = web_jobs(engine.clone(), store.clone(), clock.clone());
    Setup {
        model,
        store,
        engine,
        jobs,
        clock,
        calls,
    }
}

fn job(message_id: &str) -> TurnJob {
    web_job("c1", "u1", message_id, "what's on?")
}

fn tool_then_answer() -> Vec<Reply> {
    vec![
        Reply::new()
            .say("Let me look.")
            .call("t1", "list_events", json!({}))
            .stop(StopReason::ToolUse),
        Reply::text("Spring Open and Summer Cup."),
    ]
}

async fn roles(s: &Setup) -> Vec<Role> {
    let rows = s.store.inner.messages(&"c1".into(), 0).await.unwrap();
    assert!(
        rows.iter()
            .all(|m| m.action_id.as_deref() == Some("web#job-1"))
    );
    rows.iter().map(|m| m.role).collect()
}

async fn visible(s: &Setup) -> Vec<String> {
    let v = s.store.inner.visible(&"c1".into()).await.unwrap();
    v.into_iter().map(|e| e.text).collect()
}

/// Fail after `survive` message appends (storage gave out), then run the same job again on a
/// healthy store.
async fn die_then_retry(survive: i64, replies: Vec<Reply>) -> (Setup, engine::TurnOutcome) {
    die_then_retry_in(setup(replies).await, survive).await
}

/// [`die_then_retry`] on a setup of the caller's.
async fn die_then_retry_in(s: Setup, survive: i64) -> (Setup, engine::TurnOutcome) {
    s.store.fail_after(survive);
    let first = s.jobs.run(&job("job-1"), BUDGET).await;
    assert!(
        matches!(&first, JobOutcome::Failed(why) if why.to_string().contains("storage failed")),
        "{first:?}"
    );
    s.store.heal();
    // The failed attempt released its claim: the retry takes over at once (no waiting for the
    // claim to expire, no delivery burnt on "another worker holds this job").
    let ran = s
        .jobs
        .run_streamed(&job("job-1"), BUDGET, &CollectSink::default())
        .await;
    assert_eq!(ran.outcome, JobOutcome::Done);
    (s, ran.turn.unwrap())
}

#[tokio::test]
async fn died_before_the_answer_was_stored_calls_the_model_again_once() {
    // The user message was stored; the first answer was lost with the worker.
    let mut replies = vec![Reply::text("lost with the worker")];
    replies.extend(tool_then_answer());
    let (s, outcome) = die_then_retry(1, replies).await;
    assert_eq!(outcome.end, TurnEnd::Answered);
    assert_eq!(
        roles(&s).await,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(s.calls.list().len(), 1);
    assert_eq!(s.model.requests().len(), 3);
    assert_eq!(
        visible(&s).await,
        ["what's on?", "Let me look.\n\nSpring Open and Summer Cup."]
    );
    let conv = s.store.conversation(&"c1".into()).await.unwrap().unwrap();
    assert_eq!(conv.turn, 1, "a resumed turn is still one turn");
}

#[tokio::test]
async fn died_before_the_tool_message_was_written_reuses_the_recorded_result() {
    // Stored: user, assistant asking for list_events, and list_events' own result record.
    // Lost: the tool message. The tool does not run again.
    let (s, outcome) = die_then_retry(2, tool_then_answer()).await;
    assert_eq!(outcome.end, TurnEnd::Answered);
    assert_eq!(
        roles(&s).await,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(
        s.model.requests().len(),
        2,
        "the stored answer is not asked for again"
    );
    assert_eq!(s.calls.list().len(), 1, "the recorded result is reused");
    assert_eq!(outcome.reply, "Let me look.\n\nSpring Open and Summer Cup.");
    // Metrics count the resumed run as no new turn, with only the call it made.
    assert!(outcome.resumed);
    assert_eq!((outcome.model_calls, outcome.new_model_calls), (2, 1));
}

/// An answer with two calls that change things, then a closing answer.
fn two_creations() -> Vec<Reply> {
    vec![
        Reply::new()
            .say("Creating both.")
            .call(
                "t1",
                "create_event",
                json!({"title": "Spring Open", "date": "2027-04-01"}),
            )
            .call(
                "t2",
                "create_event",
                json!({"title": "Summer Cup", "date": "2027-07-01"}),
            )
            .stop(StopReason::ToolUse),
        Reply::text("Both are in."),
    ]
}

#[tokio::test]
async fn a_resumed_turn_runs_only_the_calls_that_never_finished_and_the_model_sees_the_same_bytes()
{
    // The uninterrupted run, for comparison.
    let clean = setup(two_creations()).await;
    let ran = clean
        .jobs
        .run_streamed(&job("job-1"), BUDGET, &CollectSink::default())
        .await;
    assert_eq!(ran.outcome, JobOutcome::Done);

    // The same turn, cut after the first call's result was recorded and the second call ran
    // but could not be recorded (the worker died there).
    let s = setup(two_creations()).await;
    s.store.fail_results_after(1);
    let first = s.jobs.run(&job("job-1"), BUDGET).await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    s.store.heal();
    let ran = s
        .jobs
        .run_streamed(&job("job-1"), BUDGET, &CollectSink::default())
        .await;
    assert_eq!(ran.outcome, JobOutcome::Done);
    let titles: Vec<String> = s
        .calls
        .list()
        .iter()
        .map(|(_, input)| input["title"].as_str().unwrap().to_owned())
        .collect();
    // The first call's effect happened once; the second, whose result never got recorded,
    // ran again (the one window a crash can repeat: between a tool's effect and its record).
    assert_eq!(titles, ["Spring Open", "Summer Cup", "Summer Cup"]);
    // What the model was sent after the tools is byte for byte what the clean run sent.
    let (a, b) = (clean.model.requests(), s.model.requests());
    assert_eq!(a.len(), 2);
    assert_eq!(b.len(), 2);
    assert_eq!(
        serde_json::to_string(&a[1].messages).unwrap(),
        serde_json::to_string(&b[1].messages).unwrap()
    );
    assert_eq!(
        visible(&s).await,
        ["what's on?", "Creating both.\n\nBoth are in."]
    );
}

#[tokio::test]
async fn a_crash_after_every_result_was_recorded_repeats_no_effect() {
    let s = setup(two_creations()).await;
    // Both results recorded; the tool message (third message append) is lost.
    s.store.fail_after(2);
    let first = s.jobs.run(&job("job-1"), BUDGET).await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    s.store.heal();
    assert_eq!(s.jobs.run(&job("job-1"), BUDGET).await, JobOutcome::Done);
    assert_eq!(s.calls.list().len(), 2, "each creation ran exactly once");
    assert_eq!(
        roles(&s).await,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
}

#[tokio::test]
async fn died_after_the_tool_result_was_stored_never_runs_the_tool_again() {
    // Stored: user, assistant, tool result. Lost: the final answer.
    let mut replies = tool_then_answer();
    replies.insert(1, Reply::text("lost with the worker"));
    let (s, outcome) = die_then_retry(3, replies).await;
    assert_eq!(outcome.end, TurnEnd::Answered);
    assert_eq!(s.calls.list().len(), 1, "the stored result is reused");
    assert_eq!(
        roles(&s).await,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(outcome.reply, "Let me look.\n\nSpring Open and Summer Cup.");
    // The retry's request replays the stored rows unchanged.
    let requests = s.model.requests();
    assert_eq!(requests[1].messages, requests[2].messages);
}

#[tokio::test]
async fn a_finished_turn_run_again_changes_nothing() {
    let s = setup(tool_then_answer()).await;
    let first = s
        .jobs
        .run_streamed(&job("job-1"), BUDGET, &CollectSink::default())
        .await;
    assert_eq!(first.outcome, JobOutcome::Done);
    let first = first.turn.unwrap();
    // A redelivery of the done job is skipped by its claim …
    assert_eq!(
        s.jobs.run(&job("job-1"), BUDGET).await,
        JobOutcome::Skipped("already done")
    );
    // … and the engine itself, asked for the same action again, resumes it as finished.
    let again = s
        .engine
        .run_turn(
            TurnInput {
                sent_at_ms: None,
                typed_yes: engine::TypedYes::Confirms,
                conversation_id: "c1".into(),
                text: "what's on?".into(),
                action_id: ActionId("web#job-1".into()),
                attachments: Vec::new(),
                attachment_notes: Vec::new(),
                button_id: None,
            },
            &CollectSink::default(),
        )
        .await
        .unwrap();
    assert_eq!(again.end, TurnEnd::Answered);
    assert_eq!(again.reply, first.reply);
    assert_eq!(
        s.model.requests().len(),
        2,
        "no model call for a finished turn"
    );
    assert_eq!(s.calls.list().len(), 1);
    assert_eq!(roles(&s).await.len(), 4);
    assert_eq!(visible(&s).await.len(), 2);
}

#[tokio::test]
async fn a_dead_workers_claim_keeps_the_job_until_it_expires() {
    let s = setup(tool_then_answer()).await;
    // A worker claimed the job and died without a word (no release).
    let now = s.clock.load(Ordering::SeqCst);
    let claimed = s
        .store
        .claim_job("web#job-1", now, now + BUDGET.as_millis() as i64)
        .await
        .unwrap();
    assert_eq!(claimed, store::Claim::Fresh);
    let busy = s.jobs.run(&job("job-1"), BUDGET).await;
    assert!(
        matches!(&busy, JobOutcome::Failed(channel_jobs::JobError::Busy)),
        "{busy:?}"
    );
    assert_eq!(
        s.model.requests().len(),
        0,
        "no turn while the claim is live"
    );
    s.clock
        .fetch_add(BUDGET.as_millis() as i64 + 1, Ordering::SeqCst);
    assert_eq!(s.jobs.run(&job("job-1"), BUDGET).await, JobOutcome::Done);
    assert_eq!(visible(&s).await.len(), 2);
}

#[tokio::test]
async fn died_after_compacting_before_the_message_was_stored_keeps_the_message() {
    // The second turn compacts (its notes open segment 1 with the turn's action id), then the
    // worker dies before the user's message is stored. The retry must not take the notes for
    // that message: the words are stored after the notes and answered.
    let options = EngineOptions {
        // Past it after the first turn; the notes alone are under it.
        compaction_threshold_chars: 80,
        ..EngineOptions::default()
    };
    let replies = vec![
        Reply::text("Spring Open on Saturday and Summer Cup in July, with a workshop on Sunday."),
        Reply::text("The user asked what is on: Spring Open, Summer Cup."),
        Reply::text("Nothing tomorrow."),
    ];
    let s = setup_with(replies, options).await;
    let ran = s.jobs.run(&job("job-1"), BUDGET).await;
    assert_eq!(ran, JobOutcome::Done);
    // The notes are stored; the user's message is not.
    s.store.fail_after(1);
    let second = web_job("c1", "u1", "job-2", "and tomorrow?");
    let first = s.jobs.run(&second, BUDGET).await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    let conv = s.store.conversation(&"c1".into()).await.unwrap().unwrap();
    assert_eq!(conv.segment, 1, "compacted before it died");
    s.store.heal();
    let ran = s
        .jobs
        .run_streamed(&second, BUDGET, &CollectSink::default())
        .await;
    assert_eq!(ran.outcome, JobOutcome::Done);
    assert_eq!(ran.turn.unwrap().reply, "Nothing tomorrow.");
    let rows = s.store.inner.messages(&"c1".into(), 1).await.unwrap();
    let texts: Vec<(Role, String)> = rows.iter().map(|m| (m.role, m.text())).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(
        texts[0].1.contains("Spring Open, Summer Cup"),
        "the notes: {texts:?}"
    );
    assert_eq!(texts[1], (Role::User, "and tomorrow?".into()));
    assert_eq!(texts[2], (Role::Assistant, "Nothing tomorrow.".into()));
    let asked = s.model.requests().pop().unwrap();
    let said: String = asked
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| p.as_text())
        .collect();
    assert!(
        said.contains("and tomorrow?"),
        "the model read the words: {said}"
    );
    let shown = s.store.inner.visible(&"c1".into()).await.unwrap();
    assert!(shown.iter().any(|e| e.text == "and tomorrow?"));
    assert_eq!(
        s.model.requests().len(),
        3,
        "the notes were not asked for again"
    );
}

/// A turn left asking for tools and never given up (the web function's process killed
/// mid-turn; a channel job whose last attempt ran out of time): the next message's turn closes
/// it first, its calls answered as recorded or as not executed, so no request ever carries a
/// call without its result after it (a provider refuses one, and every later message of the
/// conversation with it), and no call of the old turn runs again.
#[tokio::test]
async fn a_turn_left_asking_for_tools_is_closed_when_the_next_message_comes() {
    let mut replies = two_creations();
    replies.truncate(1);
    replies.push(Reply::text("Both were asked for; let me check the list."));
    let s = setup(replies).await;
    // The first call's result is recorded, the second's is not: the worker died there.
    s.store.fail_results_after(1);
    let first = s.jobs.run(&job("job-1"), BUDGET).await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    s.store.heal();

    // Nobody tries job-1 again or gives it up; the user writes again.
    let next = web_job("c1", "u1", "job-2", "did it work?");
    let ran = s
        .jobs
        .run_streamed(&next, BUDGET, &CollectSink::default())
        .await;
    assert_eq!(ran.outcome, JobOutcome::Done);
    assert_eq!(s.calls.list().len(), 2, "no call of the old turn ran again");

    let requests = s.model.requests();
    let sent = &requests.last().unwrap().messages;
    for (i, message) in sent.iter().enumerate() {
        let asked: Vec<&str> = message
            .parts
            .iter()
            .filter_map(|p| match p {
                transcript::Part::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        if asked.is_empty() {
            continue;
        }
        let answered: Vec<(&str, String)> = sent
            .get(i + 1)
            .filter(|m| m.role == Role::Tool)
            .map(|m| {
                m.parts
                    .iter()
                    .filter_map(|p| match p {
                        transcript::Part::ToolResult {
                            tool_use_id,
                            content,
                            ..
                        } => Some((tool_use_id.as_str(), content.to_string())),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ids: Vec<&str> = answered.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            ids, asked,
            "message {i}: every call answered right after it"
        );
        // The recorded result stands. The other call ran but its result was lost, and the
        // sample tools keep no receipt: it reads as not executed, as a give-up says (a planner
        // tool's receipt would answer it as done: `abandon.rs`; the window a tool without a
        // receipt leaves).
        assert!(!answered[0].1.contains("NOT EXECUTED"), "{answered:?}");
        assert!(answered[1].1.contains("NOT EXECUTED"), "{answered:?}");
    }
    assert!(
        sent.iter().any(|m| m.role == Role::Tool),
        "the old turn's calls are in the request, answered"
    );
    let rows = s.store.inner.messages(&"c1".into(), 0).await.unwrap();
    let shape: Vec<(Role, &str)> = rows
        .iter()
        .map(|m| (m.role, m.action_id.as_deref().unwrap()))
        .collect();
    assert_eq!(
        shape,
        [
            (Role::User, "web#job-1"),
            (Role::Assistant, "web#job-1"),
            (Role::Tool, "web#job-1"),
            (Role::Assistant, "web#job-1"),
            (Role::User, "web#job-2"),
            (Role::Assistant, "web#job-2"),
        ]
    );
    assert_eq!(rows[3].text(), engine::lines::STOPPED);
}

/// An answer cut off (`max_tokens`) with a call in it: its call is never run, on the first
/// attempt or on a retry after the worker died before its "not executed" result, or before the
/// "cut off" line after it; the user gets that line once, and the model is not asked again.
#[tokio::test]
async fn a_cut_off_answers_call_is_not_run_when_the_turn_is_resumed() {
    let cut_off = || {
        vec![
            Reply::new()
                .say("Let me look.")
                .call("t1", "list_events", json!({}))
                .stop(StopReason::MaxTokens),
        ]
    };
    // Stored before the worker died: the user's message and the answer (2), and also the
    // calls' "not executed" result (3).
    for survive in [2, 3] {
        let (s, outcome) = die_then_retry(survive, cut_off()).await;
        assert_eq!(outcome.end, TurnEnd::CutOff, "{survive}");
        assert!(s.calls.list().is_empty(), "{survive}: the call never ran");
        assert_eq!(s.model.requests().len(), 1, "{survive}");
        assert_eq!(
            roles(&s).await,
            [Role::User, Role::Assistant, Role::Tool, Role::Assistant],
            "{survive}"
        );
        assert!(
            outcome.reply.ends_with(engine::lines::CUT_OFF),
            "{survive}: {}",
            outcome.reply
        );
    }
}

/// The ceiling's last answer asked for a call, which is answered as not executed; the worker
/// died before the ceiling's line. The retry says that line and asks the model nothing more.
#[tokio::test]
async fn a_turn_resumed_at_its_ceiling_makes_no_further_model_call() {
    let options = EngineOptions {
        max_cycles: 1,
        ..EngineOptions::default()
    };
    // User, answer, its "not executed" result; the ceiling's line is lost.
    let (s, outcome) = die_then_retry_in(setup_with(tool_then_answer(), options).await, 3).await;
    assert_eq!(outcome.end, TurnEnd::CycleLimit);
    assert_eq!(s.model.requests().len(), 1, "no call past the ceiling");
    assert!(s.calls.list().is_empty());
    assert_eq!(
        roles(&s).await,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
}
